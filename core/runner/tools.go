package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
)

// UnknownOutcome is what the model is told about a non-idempotent call that
// was executing when its execution died.
const UnknownOutcome = "The outcome of this call is unknown: the run was interrupted while it was executing, and it may or may not have taken effect. It was not run again."

// NoResult is what the model is told, in a later turn's request, about a
// call of an earlier turn that never settled and may have run: the turn
// ended (an interrupt, a cancelled question, a rejected permission) while
// it executed, or waited on a sub-agent.
const NoResult = "This call has no result: its turn ended (interrupted or cancelled) before the call settled."

// NotRun is what the model is told about a call of an earlier turn that
// ended before the call was authorized: it never ran.
const NotRun = "This call did not run: its turn ended (interrupted or cancelled) before the call started."

var errToolTimeout = errors.New("tool call timed out")

// settle moves one call of the last step to settled. It reports false when
// the execution must stop (cancelled, fenced, or storage failed).
func (t *turn) settle(ctx context.Context, st state, step *stepRow, c callRow) bool {
	tl, known := t.r.tools.Lookup(c.name)
	if known && !st.offered(c.name) {
		known = false // the session was not offered this tool
	}
	if sa, ok := tl.(tool.Subagent); ok && known {
		tl = t.taskBody(sa) // task.go
	}
	if it, ok := tl.(tool.InTree); ok && known {
		return t.settleInTree(ctx, it, c, IdempotencyKey(st.rootID, t.x.SessionID(), step.id, c.index))
	}
	switch {
	case !known:
		return t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: fmt.Sprintf("There is no tool named %q.", c.name)}) == nil
	case c.phase == event.PhaseExecuting && !tl.Idempotent():
		// Written before a body that may have run: never run it twice.
		return t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeInterrupted, Output: UnknownOutcome}) == nil
	case c.phase == event.PhaseExecuting:
		return t.execute(ctx, tl, c, c.key, t.running(st))
	}
	// called: settleStep has authorized the call
	// (authorize.go) before any side effect.
	return t.run(ctx, st, step, c, tl)
}

// run runs an authorized call: in the tree's transaction for an in-tree
// tool, otherwise written executing, with its key, before the body starts.
func (t *turn) run(ctx context.Context, st state, step *stepRow, c callRow, tl tool.Tool) bool {
	if ctx.Err() != nil {
		return false
	}
	key := IdempotencyKey(st.rootID, t.x.SessionID(), step.id, c.index)
	if sa, ok := tl.(tool.Subagent); ok { // an approved background task call (settle wraps its own; a foreground one parks, park.go)
		tl = t.taskBody(sa)
	}
	if it, ok := tl.(tool.InTree); ok {
		return t.settleInTree(ctx, it, c, key)
	}
	if err := t.append(ctx, false, event.ToolExecuting, event.Executing{CallID: c.id, IdempotencyKey: key}); err != nil {
		return false
	}
	return t.execute(ctx, tl, c, key, t.running(st))
}

// settleInTree runs a tool whose effect lives in the tree's database inside
// the transaction that settles it: the effect and the settlement commit
// together, so there is nothing to re-run and nothing to lose.
func (t *turn) settleInTree(ctx context.Context, it tool.InTree, c callRow, key string) bool {
	call := tool.Call{ID: c.id, Name: c.name, Arguments: json.RawMessage(c.arguments), IdempotencyKey: key, SessionID: t.x.SessionID()}
	limit := it.Limits().OutputCap
	if limit <= 0 {
		limit = t.r.cfg.outputCap
	}
	_, err := t.x.AppendFunc(ctx, true, func(tx storage.Tx) ([]core.NewEvent, error) {
		out, puts, err := it.RunInTree(kvStore{tx}, call)
		s := event.Settled{CallID: c.id, Outcome: event.OutcomeOK, Output: capOutput(out, limit), Ran: true, KVPuts: puts}
		if err != nil {
			s = event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: capOutput(err.Error(), limit), Ran: true}
		}
		return []core.NewEvent{{Type: event.ToolSettled, Payload: s}}, nil
	})
	return err == nil
}

// kvStore reads the tree's key-value store inside a transaction.
type kvStore struct{ tx storage.Tx }

func (s kvStore) Get(key string) (string, bool, error) {
	var v string
	found, err := storage.QueryRow(s.tx, `SELECT value FROM kv WHERE key = ?`, []any{key}, &v)
	return v, found, err
}

func (t *turn) settled(ctx context.Context, s event.Settled) error {
	return t.append(ctx, s.Ran, event.ToolSettled, s)
}

// execute runs the tool body under its wall limit and settles the result.
// A body that ignores cancellation past its limit is abandoned: the call
// settles as timed out and whatever the body returns later is discarded.
//
// No body starts once the execution is cancelled, and a body that started
// is waited for (until it returns or its limit passes) before execute
// returns: an interrupt is recorded only after the execution returns, so
// no body starts or finishes after the interrupt commits, except one that
// ignores cancellation past the interrupt's grace period (DESIGN §6.4).
//
// A body that returned has a known result even if the execution was
// stopped meanwhile (a graceful shutdown, an interrupt): it is settled, so
// a resume does not settle the call as "outcome unknown" and invite the
// model to repeat its effect. That settlement lands before the stop's
// record, which waits for execute, or not at all: an interrupt committed
// past its grace period has released the claim, and the fence refuses it.
//
// policy is the snapshot the body runs under (authorize.go's running): its
// tool.Call's Permit and the rules behind it.
func (t *turn) execute(ctx context.Context, tl tool.Tool, c callRow, key string, policy permission.Policy) bool {
	if ctx.Err() != nil {
		return false // the call stays executing; recovery decides
	}
	limits := tl.Limits()
	if limits.Timeout <= 0 {
		limits.Timeout = t.r.cfg.toolTimeout
	}
	if limits.OutputCap <= 0 {
		limits.OutputCap = t.r.cfg.outputCap
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	expired := make(chan struct{})
	stop := t.x.Clock().AfterFunc(limits.Timeout, func() { cancel(errToolTimeout); close(expired) })
	defer stop()

	done := make(chan bodyResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- bodyResult{err: fmt.Errorf("tool panicked: %v", p)}
			}
		}()
		out, err := tl.Execute(callCtx, tool.Call{ID: c.id, Name: c.name, Arguments: json.RawMessage(c.arguments), IdempotencyKey: key, SessionID: t.x.SessionID(),
			Permit: permit(policy, tl), SessionRules: policy.Session, SavedRules: policy.Saved})
		done <- bodyResult{out, err}
	}()

	res, returned := awaitBody(ctx, done, expired)
	switch {
	case !returned && ctx.Err() != nil:
		return false // stopped before the body returned: the call stays executing
	case !returned:
		return t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: fmt.Sprintf("The tool did not finish within %s.", limits.Timeout)}) == nil
	case stoppedByCancel(ctx, res.err):
		return false // the body says it stopped: no result, recovery decides
	}
	s := event.Settled{CallID: c.id, Outcome: event.OutcomeOK, Output: capOutput(res.out, limits.OutputCap), Ran: true}
	if res.err != nil {
		s.Outcome, s.Output = event.OutcomeError, capOutput(res.err.Error(), limits.OutputCap)
	}
	// Must land although the execution may be stopping: only the fence (or
	// the instance stopping during a wait for storage) refuses it.
	if err := t.settled(context.WithoutCancel(ctx), s); err != nil {
		return false
	}
	return ctx.Err() == nil
}

// bodyResult is what a tool body returned.
type bodyResult struct {
	out string
	err error
}

// awaitBody waits for the body to return (returned = true) or its wall
// limit to pass. A stop of the execution (ctx) cancels the body through its
// context and keeps waiting: the body's result, if it comes, is known.
func awaitBody(ctx context.Context, done <-chan bodyResult, expired <-chan struct{}) (res bodyResult, returned bool) {
	select {
	case res = <-done:
		return res, true
	case <-expired:
		return res, false
	case <-ctx.Done():
	}
	select {
	case res = <-done:
		return res, true
	case <-expired:
		return res, false
	}
}

// stoppedByCancel reports whether a body's error says it stopped because
// the execution was cancelled, rather than giving a result: it then tells
// nothing of its effect, and the call is left executing for recovery
// (re-run with its key if idempotent, otherwise settled as unknown).
func stoppedByCancel(ctx context.Context, err error) bool {
	if ctx.Err() == nil || err == nil {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(ctx))
}

// capOutput cuts s to at most max bytes (at a rune boundary) and says so.
// A tool's output is stored whole in one event, so it is also cut to at
// most core.MaxStoredText as stored, whatever the cap (a tool_output_cap of
// 1 MiB would otherwise let a page of '<' take 6 MB, more than a Durable
// Object stores in one value).
func capOutput(s string, max int) string {
	if len(s) <= max && core.StoredLen(s) <= core.MaxStoredText {
		return s
	}
	cut := min(len(s), max)
	for cut < len(s) && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	kept := core.StoredPrefix(s[:cut], core.MaxStoredText-truncatedNoteRoom)
	return kept + fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", len(kept), len(s))
}

// truncatedNoteRoom is what capOutput's note takes as stored, at most:
// its text, the newline's escape and two counts of up to 20 digits.
const truncatedNoteRoom = 96
