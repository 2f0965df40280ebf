package core

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
)

// Action is what recovery decided for a claim.
type Action int

const (
	// Skip leaves the claim alone (it runs here, or is not there anymore).
	Skip Action = iota
	// Start starts an execution without counting an attempt: the claim never
	// started one, or its scheduled retry came due.
	Start
	// Resume counts attempt Decision.Attempt durably, then starts a new
	// execution after the continuation notice (none when the turn's last
	// step is its final answer: nothing is left to ask the model), or, when
	// Decision.Abort is set, fails the turn with failed{type:"aborted"}.
	Resume
	// Abort fails the turn with failed{type:"aborted"} without counting
	// (the claim is older than the configured maximum age).
	Abort
	// Release drops the claim (a child no live job names).
	Release
	// Sleep re-arms the wake-up for Decision.At and counts nothing.
	Sleep
	// Settle is core's, never recovery's: the turn's execution ran out of
	// storage for its whole settlement window, and now that storage is back
	// Recover wrote the failed{type:"storage"} it owed (Decision.Message)
	// instead of resuming the turn.
	Settle
)

// Decision is recovery's verdict for one claim.
type Decision struct {
	Action  Action
	Attempt int    // for Resume
	Abort   bool   // for Resume: the attempt is past the budget
	At      int64  // for Sleep
	Message string // for Abort and Resume+Abort: the failure message
}

// Recover applies recovery's decision for one session's claim atomically:
// under the claim lock, in one transaction, it re-reads the claim, asks
// decide, and writes the outcome; a started execution begins running here
// before the lock is released. Nothing waits on the execution.
//
// decide judges the claim as of now, the write's timestamp: the time every
// event the decision appends carries. A write that waited for storage
// commits with the time it began (DESIGN §5), so a decision judged at the
// clock of a later attempt could start a retry whose execution.started is
// dated before the retry was due; judged at the write's time it sleeps
// instead, and the caller recovers the claim again in a fresh write, dated
// after the retry was due (recovery.Sweep does, at once).
func (inst *Instance) Recover(ctx context.Context, sessionID string, decide func(c ClaimState, now int64) Decision) (Decision, error) {
	inst.claimMu.Lock()
	defer inst.claimMu.Unlock()
	if inst.isClosed() {
		return Decision{}, ErrClosed
	}
	// Read before the transaction: nothing inside one may take a lock. The
	// claim lock keeps it from changing except by an execution stopping,
	// which only makes this conservative (skip now, the next sweep acts).
	// A wait for storage lets go of the lock, so each attempt reads again.
	var runningHere, hasOwed bool
	var owed owedFailure
	var d Decision
	var p *plan
	w := inst.newWrite()
	w.locked = true
	w.before = func(int) error {
		if inst.isClosed() {
			return ErrClosed
		}
		runningHere = inst.RunningHere(sessionID)
		owed, hasOwed = inst.owedFor(sessionID)
		return nil
	}
	err := w.run(ctx, func(t *txw) error {
		d, p = Decision{}, nil
		c, found, err := t.claims().state(sessionID)
		if err != nil || !found {
			return err
		}
		c.RunningHere = runningHere
		if c.RunningHere {
			return nil
		}
		if hasOwed && owed.executionID == c.ExecutionID && owed.promptID == c.PromptID {
			// The turn's execution could not record its storage failure
			// before storage went away for good; storage is back now.
			d = Decision{Action: Settle, Message: owed.message}
			// Its execution stopped at the lost write: a step it left open
			// was stopped, as when the failure is written at once.
			p, err = t.endTurn(c.SessionID, turnEnd{promptID: c.PromptID, typ: event.ExecutionFailed, cut: event.CutStopped,
				payload: event.Failed{ExecutionID: c.ExecutionID, PromptID: c.PromptID, Type: event.FailStorage, Message: owed.message}}, true)
			return err
		}
		d = decide(c, t.now())
		p, err = t.apply(c, d)
		return err
	})
	if hasOwed && err == nil {
		inst.forgetOwed(sessionID) // written now, or the claim moved on
	}
	if err != nil {
		return d, fmt.Errorf("recover session %s: %w", sessionID, err)
	}
	if d.Action == Sleep {
		if err := inst.host.Wake.Arm(ctx, d.At); err != nil {
			return d, fmt.Errorf("recover session %s: arm wake-up: %w", sessionID, err)
		}
	}
	if p != nil && inst.RunningHere(sessionID) {
		// A rerun that found its commit stored (a late IOERR) did not run fn
		// again; meanwhile, with the claim lock let go for the wait, another
		// recovery started an execution here, which now holds the claim.
		// The plan is superseded: one drain per session.
		inst.log.Info("a recovery found committed late is superseded by an execution started meanwhile", "session", sessionID, "execution", p.id)
		p = nil
	}
	inst.launch(p)
	if d.Action == Release || d.Action == Abort || d.Action == Settle || d.Abort {
		// A child's turn ended: its parent may go on now (job.go).
		inst.afterChildTurn(ctx, sessionID)
	}
	return d, nil
}

func (t *txw) apply(c ClaimState, d Decision) (*plan, error) {
	switch d.Action {
	case Skip, Sleep, Settle:
		return nil, nil
	case Start:
		cause := event.CausePrompt
		switch {
		case c.RetryAt != 0:
			cause = event.CauseRetry
		case c.PromptID != "" && c.ExecutionID == "":
			// A running turn whose claim names no execution was parked and
			// then resolved: the reply took the claim (DESIGN §9).
			cause = event.CauseResolution
		}
		return t.beginExecution(c.SessionID, cause)
	case Release:
		return t.orphanTurn(c)
	case Abort:
		return t.abortTurn(c, d.Message)
	case Resume:
		if d.Abort && c.PromptID != "" {
			// The turn ends here: cut the step the dead execution left open
			// now, so the count past the budget is followed by nothing but
			// the abort it causes (abortTurn then finds nothing to cut).
			if err := t.cutOpenSteps(c.SessionID, c.PromptID, event.CutInterrupted); err != nil {
				return nil, err
			}
		}
		// Counted first, in this transaction, before anything of the resumed
		// execution runs: a kill inside it finds the count on the next boot.
		if err := t.claims().countAttempt(c.SessionID, d.Attempt); err != nil {
			return nil, err
		}
		if _, err := t.append(c.SessionID, event.ExecutionResumed, event.Resumed{ExecutionID: c.ExecutionID, PromptID: c.PromptID, Attempt: d.Attempt}); err != nil {
			return nil, err
		}
		if d.Abort {
			return t.abortTurn(c, d.Message)
		}
		if c.PromptID != "" {
			// The notice is for the model's next request. A turn whose last
			// step is its final answer has none: the resumed execution only
			// ends it (a kill, or a shutdown, came between the answer and
			// the end), and a notice there would be the transcript's last
			// word before the next prompt, telling of an interruption that
			// lost nothing. The resume is counted all the same (§6.6).
			answered, err := t.finalAnswered(c.PromptID)
			if err != nil {
				return nil, err
			}
			if !answered {
				if _, err := t.append(c.SessionID, event.MessageAdded, event.Message{MessageID: t.id(), PromptID: c.PromptID, Role: event.RoleNotice, Text: event.ContinuationNotice}); err != nil {
					return nil, err
				}
			}
		}
		return t.beginExecution(c.SessionID, event.CauseResume)
	}
	return nil, fmt.Errorf("unknown recovery action %d", d.Action)
}

// finalAnswered reports whether the prompt's turn has its final answer: its
// last step is recorded complete and called no tool. That is where the turn
// runner ends a turn without asking the model again (runner.Run reads the
// same), so a resume of it has nothing for a continuation notice to tell.
func (t *txw) finalAnswered(promptID string) (bool, error) {
	var answered bool
	if _, err := storage.QueryRow(t, `SELECT state = ? AND NOT EXISTS (SELECT 1 FROM tool_calls WHERE step_id = steps.id)
		FROM steps WHERE prompt_id = ? ORDER BY idx DESC LIMIT 1`, []any{string(StepCompleted), promptID}, &answered); err != nil {
		return false, fmt.Errorf("read the turn's last step: %w", err)
	}
	return answered, nil
}

// abortTurn fails the claim's turn with failed{type:"aborted"} and moves on
// to the next queued turn (or releases the claim). A claim whose turn never
// started fails its oldest queued prompt: that is the turn it was for.
func (t *txw) abortTurn(c ClaimState, message string) (*plan, error) {
	promptID := c.PromptID
	if promptID == "" {
		if _, err := storage.QueryRow(t, `SELECT id FROM prompts WHERE session_id = ? AND state = ? ORDER BY admitted_seq LIMIT 1`,
			[]any{c.SessionID, string(PromptQueued)}, &promptID); err != nil {
			return nil, err
		}
	}
	if promptID == "" {
		return nil, t.claims().release(c.SessionID)
	}
	return t.endTurn(c.SessionID, turnEnd{promptID: promptID, typ: event.ExecutionFailed, cut: event.CutInterrupted,
		payload: event.Failed{ExecutionID: c.ExecutionID, PromptID: promptID, Type: event.FailAborted, Message: message}}, true)
}

// OrphanMessage is the failure message of a sub-agent turn whose parent no
// longer waits for it.
const OrphanMessage = "The sub-agent's turn was abandoned: no running job of its parent waits for it."

// orphanTurn ends a child's task turn that no live job names: its running
// turn fails (aborted) and its queued task prompts are cancelled, so no
// task prompt is left without an end and none can revive the old turn.
// Prompts a client sent the child keep their places: the claim goes on to
// the oldest of them, started in this same transaction (endTaskTurn).
func (t *txw) orphanTurn(c ClaimState) (*plan, error) {
	var end turnEnd
	if c.PromptID != "" {
		end = turnEnd{promptID: c.PromptID, typ: event.ExecutionFailed, cut: event.CutInterrupted,
			payload: event.Failed{ExecutionID: c.ExecutionID, PromptID: c.PromptID, Type: event.FailAborted, Message: OrphanMessage}}
	}
	return t.endTaskTurn(c.SessionID, end, event.ReasonOrphaned, true)
}

// Rearm arms the wake-up from durable state while any claim remains: at the
// earliest scheduled retry still ahead, and no later than one wake interval
// from now for every other claim. A retry already due counts as such an
// other claim: the sweep before this re-arm would have started it, so it
// is due only when that sweep could not (its storage failing), and arming
// it in the past would deliver the wake-up again at once, over and over.
// While the sweeps fail in a row (Swept), it arms no earlier than the wake
// schedule's delay for that many failures (retry.Wake: 1 s doubling to
// 1 min), the host's own retry of a failed sweep: a long storage outage
// then costs a wake-up a minute, not one a wake interval; a retry due
// later than that still wakes at its own time. A claim taken meanwhile
// arms for itself (claimingWrite). It holds the claim lock, so a claim
// committing concurrently is either seen here or arms for itself
// afterwards (DESIGN §4 rules 2 and 3). It reports the time armed, or 0
// when nothing is pending.
func (inst *Instance) Rearm(ctx context.Context) (int64, error) {
	inst.claimMu.Lock()
	defer inst.claimMu.Unlock()
	var others int
	var retryAt sql.NullInt64
	now := inst.host.Clock.Now()
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		return claimTable{tx}.wakes(now, &others, &retryAt)
	})
	if err != nil {
		return 0, fmt.Errorf("rearm: %w", err)
	}
	var at int64
	if others > 0 {
		at = now + inst.cfg.wakeInterval.Milliseconds()
	}
	if retryAt.Valid && (at == 0 || retryAt.Int64 < at) {
		at = retryAt.Int64
	}
	if at == 0 {
		return 0, nil
	}
	if n := inst.sweepFailures.Load(); n > 0 {
		at = max(at, now+retry.Wake().Delay(int(n)-1).Milliseconds())
	}
	if err := inst.host.Wake.Arm(ctx, at); err != nil {
		return 0, fmt.Errorf("rearm: %w", err)
	}
	return at, nil
}

// Swept tells the instance how a sweep of its claims ended (recovery.Sweep
// does): err, or nil when it succeeded. While the sweeps fail in a row, the
// wake handler's re-arm backs off on the wake schedule (Rearm); the first
// that succeeds ends the backoff.
func (inst *Instance) Swept(err error) {
	if err == nil {
		inst.sweepFailures.Store(0)
		return
	}
	inst.sweepFailures.Add(1)
}
