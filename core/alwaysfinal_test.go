package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/internal/treetest"
)

// operatorParkDriver parks a turn, in one step, on a permission request
// for each of requests, and decides calls by the operator's rules
// (core.OperatorRules), as runner.Runner does: an always reply judges the
// step's other requests by them. A continuation answers at once.
type operatorParkDriver struct {
	operator []permission.Rule
	requests []core.PermissionRequest
	started  chan *core.Execution
}

func (d operatorParkDriver) OperatorPermissions() []permission.Rule { return d.operator }

func (d operatorParkDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.started <- x
	if x.Cause() != event.CausePrompt {
		return treetest.Answer(ctx, x)
	}
	park := &event.Parked{StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID()}
	for i, req := range d.requests {
		call := fmt.Sprintf("%s.call%d", x.ID(), i)
		body, err := json.Marshal(req)
		if err != nil {
			panic(err) // a PermissionRequest always encodes
		}
		park.Blockers = append(park.Blockers, event.Blocker{ID: core.BlockerID("p", call, 0), Kind: event.KindPermission,
			CallID: call, Adapter: core.PermissionAdapter, Request: body})
	}
	return core.Outcome{Kind: core.Parked, Park: park}
}

// allowEverything is a session config whose own rule allows every call:
// the overlay an operator's final rule must not be lifted by.
var allowEverything = json.RawMessage(`{"permissions":[{"action":"*","resource":"*","decision":"allow"}]}`)

// finalAsk is the operator's final ask about deploying to production.
var finalAsk = permission.Rule{Action: "deploy", Resource: "target:production", Decision: permission.Ask, Final: true}

// deployTo is a deploy call's request touching targets, of which final
// are those a final rule asked about when it was asked.
func deployTo(targets []string, final ...string) core.PermissionRequest {
	return core.PermissionRequest{Action: "deploy", Resources: targets, Final: final, Arguments: json.RawMessage(`{}`)}
}

// parkOnRequests parks a turn of session "s", whose config allows every
// call, on requests (in that order), the driver holding operator's rules.
func parkOnRequests(t *testing.T, operator []permission.Rule, requests ...core.PermissionRequest) parked {
	t.Helper()
	tr := treetest.New(t)
	d := operatorParkDriver{operator: operator, requests: requests, started: make(chan *core.Execution, 4)}
	n := tr.Boot(d)
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "p", Config: allowEverything})
	require.NoError(t, err)
	pid := n.Admit("s", "deploy")
	<-d.started
	n.Idle()
	bs, err := n.Inst.Blockers(ctx, "s", "")
	require.NoError(t, err)
	require.Len(t, bs, len(requests))
	require.Equal(t, "running", tr.PromptState(pid), "a parked turn")
	return parked{tr: tr, n: n, pid: pid, blockers: bs}
}

func always(responseID string) core.Reply {
	return core.Reply{Kind: event.KindPermission, ResponseID: responseID, Decision: core.ReplyAlways}
}

// An always reply approves the step's other requests the policy now allows
// (DESIGN §9), but never one an operator's final rule decides: judged by
// the whole policy, the operator's rules included, so the session's own
// allow-everything rule does not lift the final ask for a request stored
// before requests named their final resources; and a request that names
// a final resource stays pending even once the operator lifted the rule,
// whatever the rules say now. A sibling only the staging rule covers is
// approved in every case, so the reply did approve what it may. Here in
// core, where the reply is handled; runner's
// TestPermissionAlwaysKeepsFinalSiblingsPending asks the same through a
// model's calls.
func TestAlwaysReplyLeavesRequestsAFinalRuleDecidesPending(t *testing.T) {
	production := []string{"target:production"}
	for name, c := range map[string]struct {
		operator []permission.Rule
		final    core.PermissionRequest
	}{
		"as asked":                    {[]permission.Rule{finalAsk}, deployTo(production, production...)},
		"stored without final fields": {[]permission.Rule{finalAsk}, deployTo(production)},
		"final rule lifted since":     {nil, deployTo(production, production...)},
	} {
		t.Run(name, func(t *testing.T) {
			staging := deployTo([]string{"target:staging"})
			p := parkOnRequests(t, c.operator, staging, staging, c.final)
			res, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, always("r1"))
			require.NoError(t, err)
			assert.Equal(t, core.BlockerApproved, res.State)
			assert.Equal(t, []string{p.blockers[2].ID}, p.pending(t), "the staging sibling was approved, the final production one was not")
			assert.False(t, p.tr.Claim("s").Exists, "the turn waits for the production request")

			var approved []string
			for _, ev := range treetest.OfType(p.tr.Events("s"), event.PermissionApproved) {
				var r event.Resolution
				require.NoError(t, ev.Decode(&r))
				approved = append(approved, r.BlockerID+" "+r.Reason)
			}
			assert.Equal(t, []string{p.blockers[0].ID + " ", p.blockers[1].ID + " " + event.ApprovedAlways}, approved)
		})
	}
}

// An always reply to a request that names a final resource saves a rule
// for its other resources only: one for the final resource would be a
// saved allow that a later lifting of the final rule, or a request stored
// without final fields, would let approve it unasked.
func TestAlwaysReplySavesNoRuleForAFinalResource(t *testing.T) {
	p := parkOnRequests(t, []permission.Rule{finalAsk}, deployTo([]string{"target:production", "target:staging"}, "target:production"))
	_, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, always("r1"))
	require.NoError(t, err)
	var resources []string
	for _, ev := range treetest.OfType(p.tr.Events("s"), event.PermissionRuleSaved) {
		var r event.RuleSaved
		require.NoError(t, ev.Decode(&r))
		assert.Equal(t, string(permission.Allow), r.Decision)
		resources = append(resources, r.Resource)
	}
	assert.Equal(t, []string{"target:staging"}, resources)
}
