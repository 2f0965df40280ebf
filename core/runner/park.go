package runner

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
)

// settleStep settles the last step's unsettled calls and parks the step if
// some of them wait for people (DESIGN §9). Calls that need nothing run and
// settle first; a waiting call whose blockers are all resolved continues
// through its adapter; the calls that must wait are parked together, in one
// session.step.parked@1 that the execution's end records with the claim's
// release. done reports that the execution ends with out.
func (t *turn) settleStep(ctx context.Context, st state, step *stepRow) (out core.Outcome, done bool) {
	var park []event.Blocker
	waiting := false
	for _, c := range st.unsettled {
		if c.phase == event.PhaseWaiting {
			ok, pending, ask := t.continueCall(ctx, st, step, c)
			if !ok {
				return stopped, true
			}
			if ask != nil {
				park = append(park, *ask)
			}
			waiting = waiting || pending
			continue
		}
		if tl, ok := t.authorizable(st, c); ok {
			switch g, ask := t.authorizeCall(ctx, st, c, tl, 0, nil); g {
			case gateStop:
				return stopped, true
			case gateSettled:
				continue
			case gateAsk:
				if _, blocking := tl.(tool.Blocking); !blocking { // asking before a question asks nothing new
					park = append(park, *ask)
					continue
				}
			}
		}
		if args, fg := t.foregroundTask(st, c); fg {
			b, parks, ok := t.startForeground(ctx, c, args, 0) // task.go
			if !ok {
				return stopped, true
			}
			if parks {
				park = append(park, b)
			}
			continue
		}
		if bt, ok := t.blocking(st, c); ok && c.phase == event.PhaseCalled {
			asks, err := bt.Ask(json.RawMessage(c.arguments))
			if err != nil {
				// Nothing to wait for: the model reads why and may ask again.
				if t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: fmt.Sprintf("The %s call was not asked: %v.", c.name, err)}) != nil {
					return stopped, true
				}
				continue
			}
			park = append(park, blockersOf(c, asks)...)
			continue
		}
		if !t.settle(ctx, st, step, c) {
			return stopped, true
		}
	}
	if len(park) == 0 && !waiting {
		return core.Outcome{}, false
	}
	out = core.Outcome{Kind: core.Parked}
	if len(park) > 0 {
		out.Park = &event.Parked{StepID: step.id, ExecutionID: t.x.ID(), PromptID: t.x.PromptID(), Blockers: park}
	}
	return out, true
}

// blocking returns the call's tool if it is one that waits for people and
// the session was offered it.
func (t *turn) blocking(st state, c callRow) (tool.Blocking, bool) {
	tl, known := t.r.tools.Lookup(c.name)
	if !known || !st.offered(c.name) {
		return nil, false
	}
	bt, ok := tl.(tool.Blocking)
	return bt, ok
}

// blockersOf names a call's blockers: ids deterministic from the minted
// call id and the ordinal, so a resumed execution parks the same ones.
func blockersOf(c callRow, asks []tool.Ask) []event.Blocker {
	out := make([]event.Blocker, 0, len(asks))
	for n, a := range asks {
		out = append(out, event.Blocker{ID: core.BlockerID(prefixOf(a.Kind), c.id, n), Kind: a.Kind, CallID: c.id, Ordinal: n, Adapter: a.Adapter, Request: a.Request})
	}
	return out
}

func prefixOf(kind string) string {
	if kind == event.KindQuestion {
		return "q"
	}
	return kind[:1]
}

// continueCall continues a waiting call from its committed resolution,
// through the adapter recorded on its last blocker (a call approved by a
// permission may then wait on its sub-agent: the task blocker comes next):
// the model is not asked again, and the result is what the live path would
// have produced. pending reports that a blocker of the call still waits
// (another reply is due).
func (t *turn) continueCall(ctx context.Context, st state, step *stepRow, c callRow) (ok, pending bool, ask *event.Blocker) {
	var bs []core.ResolvedBlocker
	err := t.x.Read(ctx, func(tx storage.Tx) error {
		var err error
		bs, pending, err = core.CallBlockers(tx, c.id)
		return err
	})
	if err != nil {
		t.x.Log().Warn("read blockers", "call", c.id, "err", err)
		return false, false, nil
	}
	if pending {
		return true, true, nil
	}
	if len(bs) == 0 {
		return t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: "The call waited on nothing."}) == nil, false, nil
	}
	bs = lastRound(bs)
	ad, known := core.AdapterFor(bs[0].Adapter)
	if !known {
		return t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError,
			Output: fmt.Sprintf("The call's answer cannot be read by this build (adapter %s).", bs[0].Adapter)}) == nil, false, nil
	}
	cont := ad.Continue(bs)
	if cont.Run {
		tl, _ := t.r.tools.Lookup(c.name)
		if tl == nil || !st.offered(c.name) {
			return t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: fmt.Sprintf("There is no tool named %q.", c.name)}) == nil, false, nil
		}
		switch g, ask := t.reauthorize(ctx, st, c, tl, bs); g {
		case gateStop:
			return false, false, nil
		case gateSettled:
			return true, false, nil
		case gateAsk:
			return true, false, ask
		}
		if args, fg := t.foregroundTask(st, c); fg {
			// Approved, a foreground task call waits for its child as it
			// would have unasked: on a task blocker, the next ordinal.
			b, parks, ok := t.startForeground(ctx, c, args, bs[len(bs)-1].Ordinal+1) // task.go
			if !ok || !parks {
				return ok, false, nil
			}
			return true, false, &b
		}
		return t.run(ctx, st, step, c, tl), false, nil
	}
	// The person's answer is progress: it will not be asked again.
	_, err = t.x.Append(ctx, true, core.NewEvent{Type: event.ToolSettled, Payload: event.Settled{CallID: c.id, Outcome: cont.Outcome, Output: cont.Output}})
	return err == nil, false, nil
}

// lastRound keeps the trailing blockers that share the last one's adapter:
// the call's latest wait, which decides its continuation. Earlier ones are
// history (the permission request a task call was approved by).
func lastRound(bs []core.ResolvedBlocker) []core.ResolvedBlocker {
	last := bs[len(bs)-1].Adapter
	i := len(bs) - 1
	for i > 0 && bs[i-1].Adapter == last {
		i--
	}
	return bs[i:]
}

// authorizable returns the call's tool if the call is still to be
// authorized (phase called) and the session was offered the tool.
func (t *turn) authorizable(st state, c callRow) (tool.Tool, bool) {
	if c.phase != event.PhaseCalled {
		return nil, false
	}
	tl, known := t.r.tools.Lookup(c.name)
	if !known || !st.offered(c.name) {
		return nil, false
	}
	return tl, true
}
