package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// deployTool touches "target:<target>" (or what resolve makes of the
// target, to re-resolve a call differently after a restart). It declares
// no default permission, so it asks unless a rule decides. Every body run
// is counted in the ledger.
type deployTool struct {
	l          *ledger
	idempotent bool
	mu         sync.Mutex
	resolve    func(target string) []string
}

func (d *deployTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "deploy", Description: "Deploy to a target.", Schema: json.RawMessage(`{"type":"object"}`)}
}
func (d *deployTool) Idempotent() bool    { return d.idempotent }
func (d *deployTool) Limits() tool.Limits { return tool.Limits{} }

func (d *deployTool) Resources(args json.RawMessage) ([]string, error) {
	var a struct{ Target string }
	if err := json.Unmarshal(args, &a); err != nil || a.Target == "" {
		return nil, errors.New("target is required")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resolve != nil {
		return d.resolve(a.Target), nil
	}
	return []string{"target:" + a.Target}, nil
}

func (d *deployTool) Execute(ctx context.Context, c tool.Call) (string, error) {
	d.l.mu.Lock()
	defer d.l.mu.Unlock()
	d.l.executions["deploy"]++
	if !d.idempotent || d.l.effects[c.IdempotencyKey] == 0 {
		d.l.effects[c.IdempotencyKey]++
	}
	return "deployed", nil
}

// deployModel calls deploy on the target named by the turn's prompt ("deploy
// staging" → {"target":"staging"}; "deploy a b" → two calls in one step;
// "deploy rollback:a" → a call of the tool named rollback on target a) and
// answers in text once the calls have results. It keeps the last request.
type deployModel struct {
	mu       sync.Mutex
	requests int
	lastReq  model.Request
}

func (m *deployModel) Name() string { return "deploy-script" }

func (m *deployModel) Stream(_ context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	m.lastReq = req
	var last model.Message
	for _, msg := range req.Messages {
		if !msg.Notice {
			last = msg
		}
	}
	if last.Role != model.RoleUser {
		return &scriptStream{s: scriptStep{chunks: text("done")}}, nil
	}
	var chunks []model.Chunk
	for i, target := range strings.Fields(strings.TrimPrefix(last.Text, "deploy ")) {
		name := "deploy"
		if n, t, ok := strings.Cut(target, ":"); ok {
			name, target = n, t
		}
		chunks = append(chunks, model.Chunk{ToolCall: &model.ToolCallDelta{Index: i, ID: fmt.Sprintf("call_%d", i), Name: name,
			Arguments: fmt.Sprintf(`{"target":%q}`, target)}})
	}
	return &scriptStream{s: scriptStep{chunks: append(chunks, model.Chunk{Finish: model.FinishToolCalls})}}, nil
}

func (m *deployModel) toolResults() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return toolTexts(m.lastReq)
}

// permRun is one tree with the deploy tool and model.
type permRun struct {
	tr  *treetest.Tree
	m   *deployModel
	l   *ledger
	d   *deployTool
	cfg runner.Config
	sid string
}

func newPermRun(t *testing.T, idempotent bool) *permRun {
	l := newLedger()
	return &permRun{tr: treetest.New(t), m: &deployModel{}, l: l, d: &deployTool{l: l, idempotent: idempotent}, cfg: runner.NewConfig(), sid: "s"}
}

func (c *permRun) boot(t *testing.T) *treetest.Node {
	return c.tr.Boot(newRunner(t, c.m, c.cfg, c.d, tool.KVGet(), tool.KVPut()))
}

func (c *permRun) admit(t *testing.T, n *treetest.Node, clientID, text string) string {
	t.Helper()
	a, err := n.Inst.Admit(ctx, c.sid, core.PromptInput{ClientID: clientID, Text: text})
	require.NoError(t, err)
	return a.PromptID
}

// parked boots c's instance with its session, admits text as p1 and
// waits until the turn parks, asking want permission requests.
func (c *permRun) parked(t *testing.T, text string, want int) (n *treetest.Node, promptID string, asked []core.Blocker) {
	t.Helper()
	n = c.boot(t)
	n.NewSession(c.sid)
	promptID = c.admit(t, n, "p1", text)
	n.Idle()
	asked = permissions(t, n, c.sid)
	require.Len(t, asked, want)
	return n, promptID, asked
}

func permissions(t *testing.T, n *treetest.Node, sid string) []core.Blocker {
	t.Helper()
	bs, err := n.Inst.Blockers(ctx, sid, event.KindPermission)
	require.NoError(t, err)
	return bs
}

func permReply(id, decision, message string) core.Reply {
	return core.Reply{Kind: event.KindPermission, ResponseID: id, Decision: decision, Message: message}
}

// callSettlements are the settlements of one call.
func callSettlements(t *testing.T, evs []event.Event, callID string) []event.Settled {
	var out []event.Settled
	for _, s := range settlements(t, evs) {
		if s.CallID == callID {
			out = append(out, s)
		}
	}
	return out
}

func savedRules(t *testing.T, tr *treetest.Tree) []permission.Rule {
	var rules []permission.Rule
	tr.Read(func(tx storage.Tx) error {
		var err error
		rules, err = core.SavedRules(tx)
		return err
	})
	return rules
}

// A call that must ask parks with a permission request; the instance is
// torn down with the database kept; a fresh one boots; the same request id
// is listed and answerable, and each reply does what it promises.
func TestPermissionOutlivesTheInstance(t *testing.T) {
	for _, mode := range []string{"once", "reject", "reject-message", "always"} {
		t.Run(mode, func(t *testing.T) {
			c := newPermRun(t, false)
			n := c.boot(t)
			n.NewSession(c.sid)
			pid := c.admit(t, n, "p1", "deploy staging")
			n.Idle()

			asked := permissions(t, n, c.sid)
			require.Len(t, asked, 1)
			p := asked[0]
			assert.Equal(t, "p-"+p.CallID+"-0", p.ID)
			var req core.PermissionRequest
			require.NoError(t, json.Unmarshal(p.Request, &req))
			assert.Equal(t, "deploy", req.Action)
			assert.Equal(t, []string{"target:staging"}, req.Resources)
			assert.JSONEq(t, `{"target":"staging"}`, string(req.Arguments))
			assert.Equal(t, core.StatusWaiting, snapshotStatus(t, n, c.sid))
			assert.False(t, c.tr.Claim(c.sid).Exists)
			assert.Zero(t, c.l.count("deploy"), "nothing runs before the approval")
			assert.Empty(t, treetest.OfType(c.tr.Events(c.sid), event.ToolExecuting))

			n.Crash()
			n2 := c.boot(t)
			again := permissions(t, n2, c.sid)
			require.Len(t, again, 1)
			assert.Equal(t, p.ID, again[0].ID, "the same request id after a restart")
			assert.Zero(t, c.l.count("deploy"), "a restart runs nothing")

			var reply core.Reply
			switch mode {
			case "once":
				reply = permReply("r1", core.ReplyOnce, "")
			case "always":
				reply = permReply("r1", core.ReplyAlways, "")
			case "reject":
				reply = permReply("r1", core.ReplyReject, "")
			case "reject-message":
				reply = permReply("r1", core.ReplyReject, "not on a Friday")
			}
			res, err := n2.Inst.Reply(ctx, c.sid, p.ID, reply)
			require.NoError(t, err)
			n2.Idle()
			evs := c.tr.Events(c.sid)
			settled := callSettlements(t, evs, p.CallID)
			require.Len(t, settled, 1, "the call settles once")
			assert.Empty(t, permissions(t, n2, c.sid))

			switch mode {
			case "once", "always":
				assert.Equal(t, core.BlockerApproved, res.State)
				assert.Equal(t, 1, c.l.count("deploy"), "the body ran once")
				assert.Equal(t, event.OutcomeOK, settled[0].Outcome)
				assert.Greater(t, seqOf(evs, event.ToolSettled), seqOf(evs, event.ToolExecuting), "executing is written before the body")
				assert.Greater(t, seqOf(evs, event.ToolExecuting), seqOf(evs, event.PermissionApproved), "and after the approval")
				assert.Equal(t, "succeeded", c.tr.PromptState(pid))
				assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution))
			case "reject":
				assert.Equal(t, core.BlockerRejected, res.State)
				assert.Zero(t, c.l.count("deploy"), "a rejected call never runs")
				assert.Equal(t, event.OutcomeDeclined, settled[0].Outcome)
				assert.Equal(t, "interrupted", c.tr.PromptState(pid), "a plain reject ends the turn")
				terms := treetest.Terminals(evs)
				require.Len(t, terms, 1)
				var in event.Interrupted
				require.NoError(t, terms[0].Decode(&in))
				assert.Equal(t, event.ReasonUser, in.Reason)
				assert.Zero(t, startedWith(t, evs, event.CauseResolution))
			case "reject-message":
				assert.Equal(t, core.BlockerRejected, res.State)
				assert.Zero(t, c.l.count("deploy"))
				assert.Equal(t, event.OutcomeDeclined, settled[0].Outcome)
				assert.Equal(t, "succeeded", c.tr.PromptState(pid), "the turn continues")
				assert.Equal(t, []string{core.DeclinedByUser + " The user said: not on a Friday"}, c.m.toolResults(), "the model reads the feedback")
			}

			if mode != "always" {
				assert.Empty(t, savedRules(t, c.tr), "only always saves a rule")
				return
			}
			assert.Equal(t, []permission.Rule{{Action: "deploy", Resource: "target:staging", Decision: permission.Allow, Exact: true}}, savedRules(t, c.tr))
			// The saved rule survives another restart and covers the same
			// resource: a later call does not ask; another resource does.
			n2.Crash()
			n3 := c.boot(t)
			parkedBefore := len(treetest.OfType(c.tr.Events(c.sid), event.StepParked))
			p2 := c.admit(t, n3, "p2", "deploy staging")
			n3.Idle()
			assert.Equal(t, "succeeded", c.tr.PromptState(p2))
			assert.Equal(t, 2, c.l.count("deploy"), "the always rule allowed the second call")
			assert.Len(t, treetest.OfType(c.tr.Events(c.sid), event.StepParked), parkedBefore, "no new request")
			c.admit(t, n3, "p3", "deploy production")
			n3.Idle()
			other := permissions(t, n3, c.sid)
			require.Len(t, other, 1, "another resource asks")
			assert.Equal(t, 2, c.l.count("deploy"))
		})
	}
}

// Kill before and after every commit from the admission through the ask,
// the approval, the call's executing and its settlement to the turn's end;
// the client retries its admission and its reply (same ids) on a fresh
// instance. The body runs at most once (non-idempotent tool), exactly once
// when the kill came before executing or the tool is idempotent; the
// request is approved exactly once and never resolved by the kill. An
// always reply's rule is saved with the approval, whatever the kill: the
// next call it covers runs without asking.
func TestPermissionKilledAtEveryCommit(t *testing.T) {
	type variant struct {
		idempotent bool
		decision   string
	}
	for _, v := range []variant{{false, core.ReplyOnce}, {true, core.ReplyOnce}, {false, core.ReplyAlways}} {
		idempotent, decision := v.idempotent, v.decision
		t.Run(fmt.Sprintf("idempotent=%v/%s", idempotent, decision), func(t *testing.T) {
			approve := func(n *treetest.Node, sid string) error {
				bs, err := n.Inst.Blockers(ctx, sid, event.KindPermission)
				if err != nil || len(bs) == 0 {
					return err
				}
				_, err = n.Inst.Reply(ctx, sid, bs[0].ID, permReply("r1", decision, ""))
				return err
			}
			clean := newPermRun(t, idempotent)
			n := clean.boot(t)
			n.NewSession(clean.sid)
			base := n.Kill.Commits()
			clean.admit(t, n, "p1", "deploy staging")
			n.Idle()
			require.NoError(t, approve(n, clean.sid))
			n.Idle()
			commits := n.Kill.Commits() - base
			require.Equal(t, 1, clean.l.count("deploy"))

			for i := 1; i <= commits; i++ {
				for _, after := range []bool{false, true} {
					t.Run(fmt.Sprintf("commit%02d/after=%v", i, after), func(t *testing.T) {
						c := newPermRun(t, idempotent)
						n := c.boot(t)
						n.NewSession(c.sid)
						n.Kill.KillAt(i, after)
						_, _ = n.Inst.Admit(ctx, c.sid, core.PromptInput{ClientID: "p1", Text: "deploy staging"})
						n.Idle()
						var rid string
						if !dead(n) {
							bs := permissions(t, n, c.sid)
							require.Len(t, bs, 1)
							rid = bs[0].ID
							_ = approve(n, c.sid) // may die inside the reply
							n.Idle()
						}
						require.True(t, dead(n), "commit %d is within the run", i)
						n.Crash()
						evs := c.tr.Events(c.sid)
						executingBeforeKill := len(treetest.OfType(evs, event.ToolExecuting)) > 0
						assert.Empty(t, treetest.OfType(evs, event.PermissionRejected), "a kill never rejects")
						assert.Empty(t, treetest.OfType(evs, event.PermissionCancelled), "a kill never cancels")
						if len(treetest.OfType(evs, event.PermissionApproved)) == 0 {
							assert.Zero(t, c.l.count("deploy"), "no body without a committed approval")
						}

						n2 := c.boot(t)
						c.admit(t, n2, "p1", "deploy staging")
						n2.Idle()
						if rid == "" {
							bs := permissions(t, n2, c.sid)
							require.Len(t, bs, 1, "the fresh instance asked")
							rid = bs[0].ID
						}
						res, err := n2.Inst.Reply(ctx, c.sid, rid, permReply("r1", decision, ""))
						require.NoError(t, err, "the client's retried reply is the original outcome or the first")
						assert.Equal(t, core.BlockerApproved, res.State)
						n2.Idle()

						evs = c.tr.Events(c.sid)
						terms := treetest.Terminals(evs)
						require.Len(t, terms, 1, "one terminal")
						assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
						assert.Len(t, treetest.OfType(evs, event.StepParked), 1, "asked once")
						assert.Len(t, treetest.OfType(evs, event.PermissionApproved), 1, "approved once")
						assert.Equal(t, "p-"+strings.TrimSuffix(strings.TrimPrefix(rid, "p-"), "-0")+"-0", rid)
						callID := strings.TrimSuffix(strings.TrimPrefix(rid, "p-"), "-0")
						s := callSettlements(t, evs, callID)
						require.Len(t, s, 1, "settled once")
						runs := c.l.count("deploy")
						switch {
						case idempotent:
							assert.GreaterOrEqual(t, runs, 1)
							assert.Equal(t, event.OutcomeOK, s[0].Outcome)
							for key, n := range c.l.effects {
								assert.Equal(t, 1, n, "one effect for key %s", key)
							}
						case executingBeforeKill:
							assert.LessOrEqual(t, runs, 1, "a non-idempotent body runs at most once")
						default:
							assert.Equal(t, 1, runs, "killed before executing: the body runs exactly once")
							assert.Equal(t, event.OutcomeOK, s[0].Outcome)
						}
						assert.Empty(t, permissions(t, n2, c.sid))
						assert.False(t, c.tr.Claim(c.sid).Exists)
						if decision != core.ReplyAlways {
							return
						}
						assert.Equal(t, 1, len(treetest.OfType(evs, event.PermissionRuleSaved)), "the always rule saved once")
						before := c.l.count("deploy")
						next := c.admit(t, n2, "p2", "deploy staging")
						n2.Idle()
						assert.Equal(t, "succeeded", c.tr.PromptState(next))
						assert.Equal(t, 1, len(treetest.OfType(c.tr.Events(c.sid), event.StepParked)), "the saved rule approved the next call")
						assert.Equal(t, before+1, c.l.count("deploy"))
					})
				}
			}
			t.Logf("ask, approve, execute: %d commits, %d crash runs", commits, 2*commits)
		})
	}
}

// approveThenReResolve runs "deploy staging" to its permission request,
// approves it once with a kill right after the reply commits (so the
// call's body never ran), then boots the next instance with the call's
// resource re-resolved to target:staging-eu, idle. It returns the run, the
// prompt, the first request and the new node.
func approveThenReResolve(t *testing.T) (*permRun, string, core.Blocker, *treetest.Node) {
	return approveThenResolveAs(t, nil, func(target string) []string { return []string{"target:" + target + "-eu"} })
}

// approveThenResolveAs is approveThenReResolve with the call's resources
// resolved by first (nil: the tool's own) before the kill and by then
// after it.
func approveThenResolveAs(t *testing.T, first, then func(target string) []string) (*permRun, string, core.Blocker, *treetest.Node) {
	t.Helper()
	c := newPermRun(t, false)
	c.d.resolve = first
	n := c.boot(t)
	n.NewSession(c.sid)
	pid := c.admit(t, n, "p1", "deploy staging")
	n.Idle()
	p := permissions(t, n, c.sid)[0]
	n.Kill.KillAt(1, true) // the reply commits, then the process dies
	_, _ = n.Inst.Reply(ctx, c.sid, p.ID, permReply("r1", core.ReplyOnce, ""))
	n.Idle()
	require.True(t, dead(n))
	n.Crash()
	require.Len(t, treetest.OfType(c.tr.Events(c.sid), event.PermissionApproved), 1, "the approval is durable")
	require.Empty(t, treetest.OfType(c.tr.Events(c.sid), event.ToolExecuting))
	require.Zero(t, c.l.count("deploy"))

	c.d.mu.Lock()
	c.d.resolve = then
	c.d.mu.Unlock()
	n2 := c.boot(t)
	n2.Idle()
	return c, pid, p, n2
}

// An approval covers the resources it was asked about, nothing else: a
// call approved, killed before its body, and re-resolved by the next
// instance to another resource asks again (the next ordinal), and only
// that approval lets it run.
func TestPermissionReResolvedResourceAsksAgain(t *testing.T) {
	c, pid, p, n2 := approveThenReResolve(t)
	assert.Zero(t, c.l.count("deploy"), "the approval of target:staging does not cover target:staging-eu")
	asked := permissions(t, n2, c.sid)
	require.Len(t, asked, 1, "asked afresh")
	assert.Equal(t, "p-"+p.CallID+"-1", asked[0].ID, "with the next ordinal")
	var req core.PermissionRequest
	require.NoError(t, json.Unmarshal(asked[0].Request, &req))
	assert.Equal(t, []string{"target:staging-eu"}, req.Resources)

	_, err := n2.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r2", core.ReplyOnce, ""))
	require.NoError(t, err)
	n2.Idle()
	assert.Equal(t, 1, c.l.count("deploy"))
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}

// A re-ask names only what the approval does not cover: a call approved
// for two resources and re-resolved to one of them plus a new one asks
// about the new one alone, and one more approval lets it run.
func TestPermissionReAskListsOnlyTheUnapprovedResources(t *testing.T) {
	c, pid, p, n2 := approveThenResolveAs(t,
		func(target string) []string { return []string{"target:" + target, "db:" + target} },
		func(target string) []string { return []string{"target:" + target, "target:" + target + "-eu"} })
	var first core.PermissionRequest
	require.NoError(t, json.Unmarshal(p.Request, &first))
	require.Equal(t, []string{"target:staging", "db:staging"}, first.Resources)

	asked := permissions(t, n2, c.sid)
	require.Len(t, asked, 1, "asked afresh")
	var req core.PermissionRequest
	require.NoError(t, json.Unmarshal(asked[0].Request, &req))
	assert.Equal(t, []string{"target:staging-eu"}, req.Resources, "target:staging was approved already")
	assert.Zero(t, c.l.count("deploy"))

	_, err := n2.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r2", core.ReplyOnce, ""))
	require.NoError(t, err)
	n2.Idle()
	assert.Empty(t, permissions(t, n2, c.sid), "both approvals cover the call")
	assert.Equal(t, 1, c.l.count("deploy"))
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}

// A person's reject is progress (DESIGN §6.3): the continuation that
// settles the call declined resets the resume count, so an instance that
// dies right after that settlement resumes the turn at attempt 1, not
// with the count the continuation had reached before it.
func TestPermissionRejectSettledIsProgress(t *testing.T) {
	c := newPermRun(t, false)
	n, _, asked := c.parked(t, "deploy staging", 1)
	n.Kill.KillAt(2, true) // the reply, then the continuation's start
	_, _ = n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyReject, "not today"))
	n.Idle()
	require.True(t, dead(n))
	n.Crash()
	evs := c.tr.Events(c.sid)
	require.Equal(t, event.ExecutionStarted, evs[len(evs)-1].Type, "died right after the continuation started")
	require.Empty(t, callSettlements(t, evs, asked[0].CallID))

	// The next instance resumes the continuation (attempt 1) and dies
	// right after it settles the call: the sweep's resume, the settlement.
	host, _, kdb := c.tr.Host()
	inst, _, err := recovery.BootWith(ctx, host, c.tr.Cfg, newRunner(t, c.m, c.cfg, c.d, tool.KVGet(), tool.KVPut()), func(*core.Instance) error {
		kdb.KillAt(2, true)
		return nil
	})
	requireBootedOrKilled(t, inst, err)
	<-kdb.Died()
	inst.Abandon()
	evs = c.tr.Events(c.sid)
	require.Len(t, treetest.OfType(evs, event.ExecutionResumed), 1)
	require.Equal(t, event.ToolSettled, evs[len(evs)-1].Type, "died right after the settlement")
	settled := callSettlements(t, evs, asked[0].CallID)
	require.Len(t, settled, 1)
	assert.Equal(t, event.OutcomeDeclined, settled[0].Outcome)
	assert.Zero(t, c.tr.Claim(c.sid).Attempts, "the settlement reset the resume count")
	assert.Zero(t, c.l.count("deploy"))
}

// A re-resolved call is decided by its latest request: the first
// request's approval is history, so rejecting the fresh one (p-…-1) with
// feedback declines the call and its body never runs (Continue reads the
// last resolved blocker; a plain reject ends the turn without asking it).
func TestPermissionReResolvedRejectDeclines(t *testing.T) {
	c, pid, p, n2 := approveThenReResolve(t)
	asked := permissions(t, n2, c.sid)
	require.Len(t, asked, 1, "asked afresh")
	require.Equal(t, "p-"+p.CallID+"-1", asked[0].ID)

	// With a message the turn continues, so the call's continuation is
	// decided from its resolved requests rather than by ending the turn.
	_, err := n2.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r2", core.ReplyReject, "not the eu one"))
	require.NoError(t, err)
	n2.Idle()
	assert.Zero(t, c.l.count("deploy"), "the latest request was rejected: the body never runs")
	evs := c.tr.Events(c.sid)
	assert.Empty(t, treetest.OfType(evs, event.ToolExecuting))
	settled := callSettlements(t, evs, p.CallID)
	require.Len(t, settled, 1, "the call settles once")
	assert.Equal(t, event.OutcomeDeclined, settled[0].Outcome)
	assert.Equal(t, []string{core.DeclinedByUser + " The user said: not the eu one"}, c.m.toolResults(), "the model reads the latest reply")
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}

// An always reply approves the step's other pending requests it now
// covers, in its own transaction; a request for another resource stays
// pending, and the turn continues once it is resolved.
func TestPermissionAlwaysApprovesCoveredSiblings(t *testing.T) {
	c := newPermRun(t, false)
	n := c.boot(t)
	n.NewSession(c.sid)
	pid := c.admit(t, n, "p1", "deploy staging staging production")
	n.Idle()
	asked := permissions(t, n, c.sid)
	require.Len(t, asked, 3, "three calls, three requests, one park")
	require.Len(t, treetest.OfType(c.tr.Events(c.sid), event.StepParked), 1)

	_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyAlways, ""))
	require.NoError(t, err)
	n.Idle()
	left := permissions(t, n, c.sid)
	require.Len(t, left, 1, "the second staging request was approved by the always rule")
	assert.Equal(t, asked[2].ID, left[0].ID)
	assert.Zero(t, c.l.count("deploy"), "nothing runs while a blocker of the step is pending")
	// Each approval names its own blocker's call and step: the projection
	// goes by blocker id, but the event is what a client reads.
	approvals := treetest.OfType(c.tr.Events(c.sid), event.PermissionApproved)
	require.Len(t, approvals, 2, "the reply's own and the covered sibling's")
	for _, e := range approvals {
		var r event.Resolution
		require.NoError(t, e.Decode(&r))
		i := slices.IndexFunc(asked, func(b core.Blocker) bool { return b.ID == r.BlockerID })
		require.GreaterOrEqual(t, i, 0, r.BlockerID)
		assert.Equal(t, asked[i].CallID, r.CallID, "approval of %s", r.BlockerID)
		assert.Equal(t, asked[i].StepID, r.StepID, "approval of %s", r.BlockerID)
	}
	_, err = n.Inst.Reply(ctx, c.sid, asked[1].ID, permReply("r9", core.ReplyReject, ""))
	var conflict *core.ReplyConflict
	require.ErrorAs(t, err, &conflict, "a reply to the covered request is a conflict")
	assert.Equal(t, event.ApprovedAlways, conflict.Winner.Reason)

	_, err = n.Inst.Reply(ctx, c.sid, left[0].ID, permReply("r2", core.ReplyOnce, ""))
	require.NoError(t, err)
	n.Idle()
	assert.Equal(t, 3, c.l.count("deploy"))
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}

// namedDeploy is the deploy tool under another name: the same resources
// (target:<target>), so two tools ask about one resource. Its bodies are
// counted under its name.
type namedDeploy struct {
	*deployTool
	name string
}

func (d namedDeploy) Spec() model.ToolSpec {
	return model.ToolSpec{Name: d.name, Description: "Act on a target.", Schema: json.RawMessage(`{"type":"object"}`)}
}

func (d namedDeploy) Execute(ctx context.Context, c tool.Call) (string, error) {
	d.l.mu.Lock()
	defer d.l.mu.Unlock()
	d.l.executions[d.name]++
	return d.name + " done", nil
}

// An always reply saves rules for its own request's action: a sibling of
// the step asking about the same resource for another tool (another
// action) is not covered and stays pending.
func TestPermissionAlwaysLeavesSiblingOfAnotherActionPending(t *testing.T) {
	c := newPermRun(t, false)
	n := c.tr.Boot(newRunner(t, c.m, c.cfg, c.d, namedDeploy{c.d, "rollback"}))
	n.NewSession(c.sid)
	pid := c.admit(t, n, "p1", "deploy staging rollback:staging")
	n.Idle()
	asked := permissions(t, n, c.sid)
	require.Len(t, asked, 2, "two calls, two requests")
	var reqs [2]core.PermissionRequest
	for i := range asked {
		require.NoError(t, json.Unmarshal(asked[i].Request, &reqs[i]))
		assert.Equal(t, []string{"target:staging"}, reqs[i].Resources, "both ask about one resource")
	}
	require.Equal(t, "deploy", reqs[0].Action)
	require.Equal(t, "rollback", reqs[1].Action)

	_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyAlways, ""))
	require.NoError(t, err)
	n.Idle()
	left := permissions(t, n, c.sid)
	require.Len(t, left, 1, "deploy's always rule does not cover rollback")
	assert.Equal(t, asked[1].ID, left[0].ID)
	assert.Len(t, treetest.OfType(c.tr.Events(c.sid), event.PermissionApproved), 1, "only the reply's own request is approved")
	assert.Zero(t, c.l.count("deploy")+c.l.count("rollback"), "nothing runs while a blocker of the step is pending")
	assert.Equal(t, []permission.Rule{{Action: "deploy", Resource: "target:staging", Decision: permission.Allow, Exact: true}}, savedRules(t, c.tr))

	_, err = n.Inst.Reply(ctx, c.sid, left[0].ID, permReply("r2", core.ReplyOnce, ""))
	require.NoError(t, err)
	n.Idle()
	assert.Equal(t, 1, c.l.count("deploy"))
	assert.Equal(t, 1, c.l.count("rollback"))
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}

// An always reply that covers every other pending request of the step
// approves them in its transaction, and the step goes on: the turn does
// not stay parked on requests nobody is asked any more.
func TestPermissionAlwaysCoveringEverySiblingResumesTheStep(t *testing.T) {
	c := newPermRun(t, false)
	n, pid, asked := c.parked(t, "deploy staging staging", 2)

	_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyAlways, ""))
	require.NoError(t, err)
	n.Idle()
	assert.Empty(t, permissions(t, n, c.sid), "the always rule approved the sibling")
	assert.Equal(t, 2, c.l.count("deploy"))
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}

// Rules decide before anything runs: a configured deny declines the call
// (the model reads why) and a session's allow cannot lift it; a session's
// allow lets a call run without asking; a kv rule that asks parks an
// in-tree tool, whose approved effect commits with its settlement.
func TestPermissionRules(t *testing.T) {
	c := newPermRun(t, false)
	c.cfg = runner.NewConfig().WithPermissions([]permission.Rule{{Action: "deploy", Resource: "target:prod*", Decision: permission.Deny}})
	n := c.boot(t)
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: c.sid, Principal: "p", Config: json.RawMessage(`{"permissions":[
		{"action":"deploy","resource":"*","decision":"allow"}]}`)})
	require.NoError(t, err)
	pid := c.admit(t, n, "p1", "deploy production")
	n.Idle()
	assert.Zero(t, c.l.count("deploy"))
	assert.Equal(t, "succeeded", c.tr.PromptState(pid), "a declined call is the model's to handle")
	s := settlements(t, c.tr.Events(c.sid))
	require.Len(t, s, 1)
	assert.Equal(t, event.OutcomeDeclined, s[0].Outcome)
	assert.Equal(t, `The deploy call was declined by a permission rule (config "target:prod*": deny) and did not run.`, s[0].Output)
	assert.Empty(t, permissions(t, n, c.sid))

	c.admit(t, n, "p2", "deploy staging")
	n.Idle()
	assert.Equal(t, 1, c.l.count("deploy"), "the session's allow runs it without asking")
	assert.Empty(t, permissions(t, n, c.sid))
}

// The offline model drives permissions with a /tool call whose rule asks;
// the projections (blockers and saved rules among them) rebuilt from the
// log equal the stored ones after a randomized history of asks answered
// once, always, reject and reject with a message, interrupts and crashes.
func TestPermissionProjectionsEqualTheirRebuild(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			tr := treetest.New(t)
			reg, err := tool.NewRegistry(tool.Defaults()...)
			require.NoError(t, err)
			cfg := runner.NewConfig().WithPermissions([]permission.Rule{{Action: "kv_put", Resource: "kv:secret*", Decision: permission.Ask}})
			r, err := runner.New(offline.New(nil, offline.Options{}), reg, cfg)
			require.NoError(t, err)
			n := tr.Boot(r)
			sessions := []string{n.NewSession("s0")}
			texts := []string{
				`/tool kv_put {"key":"secret-1","value":"v"}`,
				`/tool kv_put {"key":"secret-2","value":"v"}`,
				`/tool kv_put {"key":"open","value":"v"}`,
				"/tool kv_put {\"key\":\"secret-1\",\"value\":\"w\"}\n/ask sure?",
			}
			replies := []core.Reply{
				permReply("", core.ReplyOnce, ""), permReply("", core.ReplyAlways, ""),
				permReply("", core.ReplyReject, ""), permReply("", core.ReplyReject, "use another key"),
			}
			for step := range 50 {
				sid := sessions[rng.IntN(len(sessions))]
				switch op := rng.IntN(10); {
				case op == 0:
					sessions = append(sessions, n.NewSession(fmt.Sprintf("s%d", step+1)))
				case op <= 3:
					_, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: texts[rng.IntN(len(texts))]})
					require.NoError(t, err)
				case op <= 7:
					bs, err := n.Inst.Blockers(ctx, sid, "")
					require.NoError(t, err)
					if len(bs) == 0 {
						continue
					}
					reply := core.Reply{Answers: [][]string{{"yes"}}}
					if bs[0].Kind == event.KindPermission {
						reply = replies[rng.IntN(len(replies))]
					}
					reply.ResponseID = fmt.Sprint("r", step)
					_, err = n.Inst.Reply(ctx, sid, bs[0].ID, reply)
					require.NoError(t, err)
				case op == 8:
					_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
					require.NoError(t, err)
				default:
					n.Idle()
					n.Crash()
					n = tr.Boot(r)
				}
				n.Idle()
			}
			n.Idle()
			n.Crash()

			before := rebuildEquals(t, tr)
			states := map[string]int{}
			for _, row := range before["blockers"] {
				states[fmt.Sprint(row[6], "/", row[9])]++ // kind / state
			}
			t.Logf("blockers by kind and state: %v; saved rules: %d", states, len(before["permission_rules"]))
			assert.Positive(t, states["permission/approved"]+states["permission/rejected"], "the history resolved permission requests")
		})
	}
}

// Two different replies race: exactly one wins, the other is a conflict
// naming the winner, and the body runs only if the approval won.
func TestPermissionRepliesRace(t *testing.T) {
	wins := map[string]int{}
	for i := range 6 {
		t.Run(fmt.Sprint("run", i), func(t *testing.T) {
			c := newPermRun(t, false)
			n := c.boot(t)
			n.NewSession(c.sid)
			c.admit(t, n, "p1", "deploy staging")
			n.Idle()
			p := permissions(t, n, c.sid)[0]
			replies := []core.Reply{permReply("a", core.ReplyOnce, ""), permReply("b", core.ReplyReject, "")}
			errs := make(chan error, 2)
			for _, r := range replies {
				go func() {
					_, err := n.Inst.Reply(ctx, c.sid, p.ID, r)
					errs <- err
				}()
			}
			var lost []*core.ReplyConflict
			for range replies {
				var conflict *core.ReplyConflict
				if err := <-errs; errors.As(err, &conflict) {
					lost = append(lost, conflict)
				} else {
					require.NoError(t, err)
				}
			}
			require.Len(t, lost, 1, "exactly one reply wins")
			n.Idle()
			evs := c.tr.Events(c.sid)
			approved, rejected := len(treetest.OfType(evs, event.PermissionApproved)), len(treetest.OfType(evs, event.PermissionRejected))
			require.Equal(t, 1, approved+rejected)
			if approved == 1 {
				assert.Equal(t, "a", lost[0].Winner.ResponseID)
				assert.Equal(t, 1, c.l.count("deploy"))
				wins["once"]++
			} else {
				assert.Equal(t, "b", lost[0].Winner.ResponseID)
				assert.Zero(t, c.l.count("deploy"))
				wins["reject"]++
			}
			assert.Len(t, treetest.Terminals(evs), 1)
		})
	}
	t.Logf("winners: %v", wins)
}

// A reply races an interrupt of the waiting session: one of them resolves
// the request, never both; if the interrupt won, the body never runs and
// the reply is refused with the interrupt's cancellation as the winner.
func TestPermissionReplyRacesInterrupt(t *testing.T) {
	for _, order := range []string{"reply-first", "interrupt-first", "race", "race", "race", "race"} {
		t.Run(order, func(t *testing.T) {
			c := newPermRun(t, false)
			n := c.boot(t)
			n.NewSession(c.sid)
			c.admit(t, n, "p1", "deploy staging")
			n.Idle()
			p := permissions(t, n, c.sid)[0]
			replied := make(chan error, 1)
			doReply := func() {
				_, err := n.Inst.Reply(ctx, c.sid, p.ID, permReply("r", core.ReplyOnce, ""))
				replied <- err
			}
			switch order {
			case "reply-first":
				doReply()
			case "race":
				go doReply()
			}
			_, err := n.Inst.Interrupt(ctx, c.sid, event.ReasonUser)
			require.NoError(t, err)
			if order == "interrupt-first" {
				doReply()
			}
			rerr := <-replied
			n.Idle()
			evs := c.tr.Events(c.sid)
			approved, cancelled := len(treetest.OfType(evs, event.PermissionApproved)), len(treetest.OfType(evs, event.PermissionCancelled))
			require.Equal(t, 1, approved+cancelled, "resolved exactly once")
			if cancelled == 1 {
				var conflict *core.ReplyConflict
				require.ErrorAs(t, rerr, &conflict)
				assert.Equal(t, event.CancelInterrupt, conflict.Winner.Reason)
				assert.Zero(t, c.l.count("deploy"), "no body after the interrupt won")
			} else {
				require.NoError(t, rerr)
				assert.NotEqual(t, "interrupt-first", order)
				assert.LessOrEqual(t, c.l.count("deploy"), 1)
			}
			assert.Len(t, treetest.Terminals(evs), 1)
			assert.False(t, c.tr.Claim(c.sid).Exists)
		})
	}
}

// A reject with a message fails only its call: the step's other request
// stays pending, and once it is approved the turn continues with both
// results. A plain reject cancels the step's other requests and ends the
// turn: nothing runs.
func TestPermissionRejectScope(t *testing.T) {
	t.Run("with a message", func(t *testing.T) {
		c := newPermRun(t, false)
		n, pid, asked := c.parked(t, "deploy a b", 2)
		_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyReject, "not a"))
		require.NoError(t, err)
		n.Idle()
		left := permissions(t, n, c.sid)
		require.Len(t, left, 1, "the other request stays pending")
		assert.Equal(t, asked[1].ID, left[0].ID)
		assert.Equal(t, "running", c.tr.PromptState(pid), "still parked")
		_, err = n.Inst.Reply(ctx, c.sid, left[0].ID, permReply("r2", core.ReplyOnce, ""))
		require.NoError(t, err)
		n.Idle()
		assert.Equal(t, "succeeded", c.tr.PromptState(pid))
		assert.Equal(t, 1, c.l.count("deploy"), "only the approved call ran")
		assert.Equal(t, []string{core.DeclinedByUser + " The user said: not a", "deployed"}, c.m.toolResults())
	})
	t.Run("plain", func(t *testing.T) {
		c := newPermRun(t, false)
		n, pid, asked := c.parked(t, "deploy a b", 2)
		_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyReject, ""))
		require.NoError(t, err)
		n.Idle()
		assert.Empty(t, permissions(t, n, c.sid))
		evs := c.tr.Events(c.sid)
		cancelled := treetest.OfType(evs, event.PermissionCancelled)
		require.Len(t, cancelled, 1, "the sibling is cancelled")
		var r event.Resolution
		require.NoError(t, cancelled[0].Decode(&r))
		assert.Equal(t, asked[1].ID, r.BlockerID)
		assert.Equal(t, event.CancelSibling, r.Reason)
		assert.Equal(t, "interrupted", c.tr.PromptState(pid))
		assert.Zero(t, c.l.count("deploy"))
		_, err = n.Inst.Reply(ctx, c.sid, asked[1].ID, permReply("r2", core.ReplyOnce, ""))
		var conflict *core.ReplyConflict
		require.ErrorAs(t, err, &conflict, "a cancelled request cannot be approved")
	})
}

// The security probe's case: the operator asks about deploy, and a session
// created with an allow-everything rule runs it unasked, unless the
// operator's ask is final. A final ask asks anyway; an always reply to it
// approves that call only (no rule saved, its pending sibling still asks),
// and the next call asks again.
func TestPermissionFinalAsk(t *testing.T) {
	allowAll := json.RawMessage(`{"permissions":[{"action":"*","resource":"*","decision":"allow"}]}`)
	ask := permission.Rule{Action: "deploy", Resource: "*", Decision: permission.Ask}

	t.Run("not final", func(t *testing.T) {
		c := newPermRun(t, false)
		c.cfg = runner.NewConfig().WithPermissions([]permission.Rule{ask})
		n := c.boot(t)
		_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: c.sid, Principal: "p", Config: allowAll})
		require.NoError(t, err)
		pid := c.admit(t, n, "p1", "deploy staging")
		n.Idle()
		assert.Empty(t, permissions(t, n, c.sid), "the session's rule lifts a plain ask, as documented")
		assert.Equal(t, 1, c.l.count("deploy"))
		assert.Equal(t, "succeeded", c.tr.PromptState(pid))
	})

	t.Run("final", func(t *testing.T) {
		c := newPermRun(t, false)
		final := ask
		final.Final = true
		c.cfg = runner.NewConfig().WithPermissions([]permission.Rule{final})
		n := c.boot(t)
		_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: c.sid, Principal: "p", Config: allowAll})
		require.NoError(t, err)
		pid := c.admit(t, n, "p1", "deploy staging staging")
		n.Idle()
		asked := permissions(t, n, c.sid)
		require.Len(t, asked, 2, "the final ask asks despite the session's allow")
		assert.Zero(t, c.l.count("deploy"))
		var req core.PermissionRequest
		require.NoError(t, json.Unmarshal(asked[0].Request, &req))
		assert.Equal(t, []string{"target:staging"}, req.Resources)
		assert.Equal(t, []string{"target:staging"}, req.Final, "the request says an always reply covers this call only")
		assert.Equal(t, final, req.Rule)

		res, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyAlways, ""))
		require.NoError(t, err)
		assert.Equal(t, core.BlockerApproved, res.State)
		n.Idle()
		assert.Empty(t, savedRules(t, c.tr), "no rule is saved that a final ask would ignore")
		assert.Empty(t, treetest.OfType(c.tr.Events(c.sid), event.PermissionRuleSaved))
		left := permissions(t, n, c.sid)
		require.Len(t, left, 1, "the sibling for the same target still asks")
		assert.Equal(t, asked[1].ID, left[0].ID)
		_, err = n.Inst.Reply(ctx, c.sid, left[0].ID, permReply("r2", core.ReplyOnce, ""))
		require.NoError(t, err)
		n.Idle()
		assert.Equal(t, 2, c.l.count("deploy"))
		assert.Equal(t, "succeeded", c.tr.PromptState(pid))

		c.admit(t, n, "p2", "deploy staging")
		n.Idle()
		require.Len(t, permissions(t, n, c.sid), 1, "the next call asks again")
		assert.Equal(t, 2, c.l.count("deploy"))
	})
}

// An always reply judges the step's other requests by the whole policy as
// the runner would decide them now, not by the saved rules alone: an allow
// saved before the operator made a rule final does not let another reply
// approve a request that rule asks about, whether the request names its
// final resource or was stored before requests did. A request that names
// a final resource stays pending even once the operator lifted the rule:
// another's reply never approves it, whatever the rules say now. A sibling
// the new rule covers, and no final rule asks about, is still approved.
func TestPermissionAlwaysKeepsFinalSiblingsPending(t *testing.T) {
	for _, variant := range []string{"as asked", "request without final field", "final rule lifted since"} {
		t.Run(variant, func(t *testing.T) {
			c := newPermRun(t, false)
			n := c.boot(t)
			n.NewSession(c.sid)
			c.admit(t, n, "p1", "deploy production")
			n.Idle()
			first := permissions(t, n, c.sid)
			require.Len(t, first, 1)
			_, err := n.Inst.Reply(ctx, c.sid, first[0].ID, permReply("r1", core.ReplyAlways, ""))
			require.NoError(t, err)
			n.Idle()
			require.Equal(t, 1, c.l.count("deploy"))
			require.Len(t, savedRules(t, c.tr), 1, "an allow for target:production, saved before the rule was final")
			n.Crash()

			// The operator now asks about production by a final rule.
			c.cfg = runner.NewConfig().WithPermissions([]permission.Rule{
				{Action: "deploy", Resource: "target:production", Decision: permission.Ask, Final: true}})
			n = c.boot(t)
			pid := c.admit(t, n, "p2", "deploy staging staging production")
			n.Idle()
			asked := permissions(t, n, c.sid)
			require.Len(t, asked, 3, "the final rule asks despite the saved allow")
			var req core.PermissionRequest
			require.NoError(t, json.Unmarshal(asked[2].Request, &req))
			require.Equal(t, []string{"target:production"}, req.Final)
			switch variant {
			case "request without final field":
				// As a request stored before requests named their final resources.
				require.NoError(t, n.Kill.Tx(ctx, func(tx storage.Tx) error {
					_, err := tx.Exec(`UPDATE blockers SET request = json_remove(request, '$.final') WHERE id = ?`, asked[2].ID)
					return err
				}))
			case "final rule lifted since":
				// The saved allow now covers production too; the request
				// still names it final.
				n.Crash()
				c.cfg = runner.NewConfig()
				n = c.boot(t)
				require.Len(t, permissions(t, n, c.sid), 3)
			}

			_, err = n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r2", core.ReplyAlways, ""))
			require.NoError(t, err)
			n.Idle()
			left := permissions(t, n, c.sid)
			require.Len(t, left, 1, "the staging sibling was approved, the final production one was not")
			assert.Equal(t, asked[2].ID, left[0].ID)
			assert.Equal(t, 1, c.l.count("deploy"), "nothing runs while a request of the step is pending")

			_, err = n.Inst.Reply(ctx, c.sid, left[0].ID, permReply("r3", core.ReplyOnce, ""))
			require.NoError(t, err)
			n.Idle()
			assert.Equal(t, 4, c.l.count("deploy"))
			assert.Equal(t, "succeeded", c.tr.PromptState(pid))
		})
	}
}

// An always reply approves the other pending requests of its own step
// only: a request another session of the tree parked on (here a sub-agent
// a client prompted) for the same action and resource stays pending until
// its own reply.
func TestPermissionAlwaysKeepsToItsStep(t *testing.T) {
	c := newPermRun(t, false)
	n := c.boot(t)
	n.NewSession(c.sid)
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: c.sid + ".1", ParentID: c.sid})
	require.NoError(t, err)
	c.admit(t, n, "p1", "deploy staging")
	_, err = n.Inst.Admit(ctx, c.sid+".1", core.PromptInput{ClientID: "c1", Text: "deploy staging"})
	require.NoError(t, err)
	n.Idle()
	mine, err := n.Inst.Blockers(ctx, c.sid, event.KindPermission)
	require.NoError(t, err)
	require.Len(t, mine, 2, "the root's request and the child's")
	var rootReq, childReq core.Blocker
	for _, b := range mine {
		if b.SessionID == c.sid {
			rootReq = b
		} else {
			childReq = b
		}
	}
	require.NotEmpty(t, rootReq.ID)
	require.NotEmpty(t, childReq.ID)

	_, err = n.Inst.Reply(ctx, c.sid, rootReq.ID, permReply("r1", core.ReplyAlways, ""))
	require.NoError(t, err)
	n.Idle()
	left := permissions(t, n, c.sid+".1")
	require.Len(t, left, 1, "the child's request waits for its own reply")
	assert.Equal(t, childReq.ID, left[0].ID)
}
