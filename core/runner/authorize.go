package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/tool"
)

// This file is the authorizing phase of a tool call (DESIGN §7, §9): before
// any side effect the call is decided by the session's permission policy
// (core/permission). Allowed calls run; denied ones settle declined; the
// others wait for a person, as permission blockers parked with the step,
// and continue through core's permission@1 adapter.

// policy is the rules the session's calls are decided by: the operator's,
// the session's own, and the tree's saved always rules, as loaded.
func (t *turn) policy(st state) permission.Policy {
	return permission.Policy{Config: t.r.cfg.permissions, Session: st.permissions, Saved: st.saved}
}

// authorization is a call's verdict, with the resources the policy still
// asks about (an approval must cover exactly these).
type authorization struct {
	verdict permission.Verdict
	pending []string
}

// authorize decides a call under policy. Resources that cannot be read
// from the arguments are the call's error: it does not run.
func authorize(policy permission.Policy, tl tool.Tool, args json.RawMessage) (authorization, error) {
	name := tl.Spec().Name
	resources, err := tl.Resources(args)
	if err != nil {
		return authorization{}, err
	}
	def := tool.DefaultDecision(tl)
	a := authorization{verdict: policy.Decide(name, def, resources)}
	if a.verdict.Decision == permission.Ask {
		a.pending = policy.Pending(name, def, resources)
	}
	return a, nil
}

// gate is what authorization decided for a call.
type gate int

const (
	gateRun     gate = iota // allowed: run the body now
	gateSettled             // settled without running (denied, unreadable arguments)
	gateAsk                 // must wait: park the returned blocker
	gateStop                // the execution must stop (a write failed)
)

// authorizeCall runs the authorizing phase of call c, the ordinal-th
// request of the call (0 for its first; a call re-resolved to other
// resources asks again with the next). approved are the resources an
// earlier approval of this call covers.
func (t *turn) authorizeCall(ctx context.Context, st state, c callRow, tl tool.Tool, ordinal int, approved []string) (gate, *event.Blocker) {
	policy := t.policy(st)
	a, err := authorize(policy, tl, json.RawMessage(c.arguments))
	if err != nil {
		out := fmt.Sprintf("The %s call did not run: its arguments do not say what it would touch: %v.", c.name, err)
		return t.settledGate(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: out})
	}
	switch a.verdict.Decision {
	case permission.Allow:
		return gateRun, nil
	case permission.Deny:
		out := fmt.Sprintf("The %s call was declined by %s and did not run.", c.name, a.verdict.DecidedBy())
		return t.settledGate(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeDeclined, Output: out})
	}
	ask := slices.DeleteFunc(slices.Clone(a.pending), func(r string) bool { return slices.Contains(approved, r) })
	if len(ask) == 0 {
		return gateRun, nil // an approval of this call covers every resource still asked about
	}
	final := slices.DeleteFunc(slices.Clone(ask), func(r string) bool { return !policy.FinalAsk(c.name, r) })
	req, err := json.Marshal(core.PermissionRequest{Action: c.name, Resources: ask, Final: final, Arguments: json.RawMessage(c.arguments),
		Rule: a.verdict.Rule, Source: string(a.verdict.Source)})
	if err != nil {
		t.x.Log().Warn("encode permission request", "call", c.id, "err", err)
		return gateStop, nil
	}
	return gateAsk, &event.Blocker{ID: core.BlockerID("p", c.id, ordinal), Kind: event.KindPermission, CallID: c.id, Ordinal: ordinal,
		Adapter: core.PermissionAdapter, Request: req}
}

func (t *turn) settledGate(ctx context.Context, s event.Settled) (gate, *event.Blocker) {
	if t.settled(ctx, s) != nil {
		return gateStop, nil
	}
	return gateSettled, nil
}

// reauthorize is the check an approved call passes before its body runs:
// each approval of the call (round, its permission requests in order, the
// last approved) covers the resources it was asked about, and only those.
// A call whose resources now differ (its tool re-resolved them otherwise)
// asks afresh about the ones no approval covers, with the next ordinal;
// one the rules now deny is declined. The approvals add up: a re-ask
// lists only what is new, so approving it lets the call run rather than
// asking again about what an earlier request approved.
func (t *turn) reauthorize(ctx context.Context, st state, c callRow, tl tool.Tool, round []core.ResolvedBlocker) (gate, *event.Blocker) {
	var approved []string
	for _, b := range round {
		var req core.PermissionRequest
		if err := json.Unmarshal(b.Request, &req); err != nil {
			return t.settledGate(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: "The call's permission record could not be read; it did not run."})
		}
		if b.Reply.Decision == core.ReplyOnce || b.Reply.Decision == core.ReplyAlways {
			approved = append(approved, req.Resources...)
		}
	}
	return t.authorizeCall(ctx, st, c, tl, round[len(round)-1].Ordinal+1, approved)
}

// running is the policy a call's body runs under: one snapshot of the
// session's policy, its session and saved rules cloned, since the body
// runs on while the turn goes on. The body's tool.Call gets both its
// Permit (permit) and, for a proxy that runs the body elsewhere, the
// rules behind it from this one snapshot, so the two cannot disagree.
func (t *turn) running(st state) permission.Policy {
	policy := t.policy(st)
	policy.Session, policy.Saved = slices.Clone(policy.Session), slices.Clone(policy.Saved)
	return policy
}

// permit is a running call's tool.Call.Permit under policy: a resource the
// call reaches beyond those it declared must be allowed outright. A deny
// is refused, and so is an ask, since a running call cannot park to ask a
// person; its approval, if any, covered only the declared resources.
func permit(policy permission.Policy, tl tool.Tool) func(...string) error {
	name, def := tl.Spec().Name, tool.DefaultDecision(tl)
	return func(resources ...string) error { return policy.Permit(name, def, resources...) }
}
