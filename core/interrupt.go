package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// Interrupt stops the session's turn and cancels its queued prompts, for the
// user (reason event.ReasonUser) or for a replacing prompt
// (event.ReasonSuperseded). It returns only after the interrupt committed, so
// a kill right after it returns can never revive the turn. It reports whether
// there was anything to interrupt.
//
// If an execution runs here it is cancelled and records the interrupt itself
// once stopped, so no model request or tool body starts after the commit;
// past the grace period the interrupt is committed directly and the fence
// stops the execution's writes. Otherwise (evicted, or only queued) the
// interrupt is committed directly. Either way, and also when there was
// nothing to interrupt, it returns only after stopping the task turns of
// descendants whose jobs an ended turn of the session ended (job.go).
func (inst *Instance) Interrupt(ctx context.Context, sessionID, reason string) (did bool, err error) {
	return inst.interrupt(ctx, sessionID, reason, nil, "")
}

// interruptTask stops a child's task turn, taskPromptID's, whose job ended
// with its parent's turn (interruptChildren), with reason event.ReasonUser
// if that turn was interrupted and event.ReasonOrphaned if it failed
// (taskEndReason), and nothing else: the prompts a client sent the child
// stay queued, and the next of them starts (endTaskTurn). A turn of the
// child's own is never stopped, even one that the task turn's end started
// while the interrupt waited. It reports whether there was a turn to stop.
func (inst *Instance) interruptTask(ctx context.Context, childID, taskPromptID string) (bool, error) {
	return inst.interrupt(ctx, childID, event.ReasonUser, nil, taskPromptID)
}

// replacing is the prompt a replace interrupt makes room for (Admit). A
// client's retry can race its first delivery: both miss each other's row
// in Admit's first look, one is admitted and starts its turn, and the
// other's interrupt would then stop the very prompt it answers as its own.
// So its client id is looked up again under the claim lock in the step
// that interrupts (before cancelling an execution, and in the transaction
// that commits an interrupt): once it is admitted, the interrupt stops
// nothing and ends with errAdmitted, admitted holding the first admission,
// or with ErrConflict if that admission had another body.
type replacing struct {
	clientID, hash string
	admitted       Admission
}

// errAdmitted: the replacing prompt's client id was admitted meanwhile.
var errAdmitted = errors.New("the replacing prompt was admitted meanwhile")

// admittedMeanwhile looks up the replacing prompt's client id. The caller
// holds claimMu, so nothing is admitted between the look and what the
// caller does next under the lock.
func (inst *Instance) admittedMeanwhile(ctx context.Context, sessionID string, rp *replacing) error {
	if rp == nil || rp.clientID == "" {
		return nil
	}
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		return (&txw{Tx: tx}).checkReplacing(sessionID, rp)
	})
	if err != nil && !errors.Is(err, errAdmitted) {
		return fmt.Errorf("interrupt session %s: %w", sessionID, err)
	}
	return err
}

// checkReplacing is errAdmitted (or ErrConflict) if rp's client id has an
// admission in the session.
func (t *txw) checkReplacing(sessionID string, rp *replacing) error {
	if rp == nil || rp.clientID == "" {
		return nil
	}
	found, err := t.admissionByClient(sessionID, rp.clientID, rp.hash, &rp.admitted)
	if err != nil {
		return err
	}
	if found {
		return errAdmitted
	}
	return nil
}

// With taskPrompt set (interruptTask) it stops that task turn only.
func (inst *Instance) interrupt(ctx context.Context, sessionID, reason string, rp *replacing, taskPrompt string) (did bool, err error) {
	taskOnly := taskPrompt != ""
	defer func() {
		if err != nil {
			return
		}
		if !did {
			if !taskOnly {
				// Nothing was left to stop here, but what ended the turn (an
				// earlier interrupt, a reply, a replace) may not have
				// stopped its descendants yet: this answer too comes only
				// once nothing of that turn's work goes on below.
				inst.interruptChildren(ctx, sessionID)
			}
			return
		}
		// Its foreground children's jobs ended with the turn (job.go).
		inst.interruptChildren(ctx, sessionID)
		inst.claimMu.Lock()
		if taskOnly {
			// The child's own queued prompt, if any, holds the claim now.
			inst.startLocked(ctx, sessionID, event.CausePrompt)
		}
		// A child's end resolved its parent's waiting call (taskwait.go).
		inst.afterChildTurn(ctx, sessionID)
		inst.claimMu.Unlock()
	}()
	cause := ErrInterrupted
	switch {
	case taskOnly:
		cause = errTaskEnded
	case reason == event.ReasonUser:
	case reason == event.ReasonSuperseded:
		cause = ErrSuperseded
	default:
		return false, invalid("interrupt: reason %q", reason)
	}
	// The executions this request tells to stop learn, when it answers,
	// whether it gave up, and then what was queued by its answer: an
	// execution told to stop cannot go on, so it records the interrupt
	// even after this request answered an error, and must then spare the
	// prompts admitted since (Execution.interruptCutoff). A task turn's
	// end cancels no prompt a client sent, so needs no such bound.
	var asked []func(gaveUp bool, upTo int64)
	defer func() {
		var upTo int64
		if err != nil && len(asked) > 0 {
			// Unreadable too: 0 says nothing of which prompts came before
			// this answer, and the record cancels none of them for it
			// (interruptCutoff): a client may send its next prompt once
			// storage is back, and that prompt must run.
			upTo, _ = inst.lastSeq(context.WithoutCancel(ctx), sessionID)
		}
		for _, answer := range asked {
			answer(err != nil, upTo)
		}
	}()
	// stopped: an execution this interrupt cancelled ended with its turn
	// interrupted. That alone does not answer the interrupt: the turn may
	// have been interrupted before (an earlier interrupt, its execution
	// still finishing here) and the execution's end may have started the
	// next turn, admitted before this interrupt. So the loop looks again
	// until nothing admitted before it runs or waits.
	//
	// But only that: once an execution it told to stop recorded the
	// interrupt, the interrupt is committed, and a prompt a client sends
	// after that (right after clicking "stop", without waiting for this
	// answer) may be running by the time the loop would look again. That
	// prompt is no more this interrupt's than one sent after its answer
	// (DESIGN §6.4), so the loop ends when the record left nothing
	// admitted up to it unended (interruptSettled). The cutoff is read
	// after the execution ended, never before the cancel: a read before it
	// would wait for a write the execution holds open, and that write may
	// be waiting for the cancel.
	var stopped bool
	// settled reads what the end of x, an execution this request told to
	// stop, left: true when nothing admitted before the interrupt is left.
	// A record whose write began before this request told x to stop may
	// be older than a prompt admitted before the request (x.recordBegun):
	// its cutoff is not this request's, and the loop looks again.
	settled := func(x *Execution, asked bool) bool {
		recorded, settled := inst.interruptSettled(ctx, sessionID, x.promptID)
		stopped = stopped || recorded
		return settled && asked
	}
	for {
		inst.claimMu.Lock()
		x := inst.runningExecution(sessionID)
		if x == nil {
			did, err := inst.interruptDirect(ctx, sessionID, reason, nil, rp, taskPrompt)
			inst.claimMu.Unlock()
			if errors.Is(err, errRunningChanged) {
				continue // an execution started here while storage was waited for
			}
			return did || stopped, err
		}
		if taskOnly && x.promptID != taskPrompt {
			// The task turn ended meanwhile (maybe starting the child's own
			// queued prompt, which x now runs): nothing of the task is left.
			inst.claimMu.Unlock()
			return stopped, nil
		}
		if err := inst.admittedMeanwhile(ctx, sessionID, rp); err != nil {
			inst.claimMu.Unlock()
			return stopped, err
		}
		if !taskOnly {
			asked = append(asked, x.interruptAsked())
			inst.testHooks().interruptAsked.run(x)
		}
		// Whether x's record, when it lands, is one written after this
		// request told x to stop (so later than everything admitted before).
		// Read under the claim lock, which every write that ends x's turn
		// holds as it begins an attempt: once the lock is let go, x's end
		// can begin its record of this very cancel, and a read then would
		// take that record for an older one.
		askedFirst := !x.recordBegun
		x.cancel(cause)
		inst.claimMu.Unlock()
		inst.testHooks().interruptCancelled.run(x)

		graceUp := make(chan struct{})
		stop := inst.host.Clock.AfterFunc(inst.cfg.interruptGrace, func() { close(graceUp) })
		select {
		case <-x.done:
			stop()
			// The execution recorded the interrupt, or ended another way just
			// before it saw the cancel (and maybe started the next turn): look
			// again until nothing admitted before the interrupt is left.
			inst.testHooks().interruptStopped.run(x)
			if settled(x, askedFirst) {
				return stopped, nil
			}
		case <-graceUp:
			inst.testHooks().interruptGraceUp.run(x)
			inst.claimMu.Lock()
			if inst.runningExecution(sessionID) == x {
				did, err := inst.interruptDirect(ctx, sessionID, reason, x, rp, taskPrompt)
				if errors.Is(err, errRunningChanged) {
					inst.claimMu.Unlock()
					// x ended (and maybe handed over) during a wait for
					// storage, perhaps recording the interrupt itself.
					if settled(x, askedFirst) {
						return stopped, nil
					}
					continue
				}
				if err == nil {
					// The fence now stops x's writes; forget it so the
					// session can run again. On failure x keeps the claim.
					inst.unregister(x)
					if x.startWanted {
						// A start found x still running here and started
						// nothing: a prompt admitted while the record
						// waited for storage with the claim lock let go,
						// say. It starts now, not at the next wake-up, nor
						// when x's body returns (it may never).
						inst.startLocked(context.WithoutCancel(ctx), sessionID, event.CausePrompt)
					}
				}
				inst.claimMu.Unlock()
				return did || stopped, err
			}
			inst.claimMu.Unlock()
			// x ended while the grace timer fired: it may have recorded the
			// interrupt itself, and may have started the next turn.
			if settled(x, askedFirst) {
				return stopped, nil
			}
		case <-ctx.Done():
			stop()
			return false, fmt.Errorf("interrupt: %w", ctx.Err())
		}
	}
}

func (inst *Instance) runningExecution(sessionID string) *Execution {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.running[sessionID]
}

// interruptSettled reports, for the prompt of an execution an interrupt
// request told to stop and saw end, whether its turn ended interrupted
// (recorded), and whether that record left no prompt of the session that
// was admitted before it unended (settled): then the interrupt has stopped
// everything it must, and whatever runs or waits now was admitted after
// it committed. The record normally cancels the whole queue (the
// request waited for it), so settled is its usual answer; a task turn's
// end spares the child's own prompts (endTaskTurn), and those admitted
// before it are still the request's to stop. Read with no lock held, once
// the execution ended, and retried: a storage blip here would make an
// interrupt that stopped a turn answer that there was nothing to
// interrupt. A read that fails answers neither, and the request looks
// again as if there were no cutoff: it never stops less than it must.
//
// settled, once true, stays true: a prompt admitted later has a later seq,
// so nothing at or before the record can become unended again.
func (inst *Instance) interruptSettled(ctx context.Context, sessionID, promptID string) (recorded, settled bool) {
	err := inst.read(ctx, func(tx storage.Tx) error {
		recorded, settled = false, false
		var state string
		if _, err := storage.QueryRow(tx, `SELECT state FROM prompts WHERE id = ?`, []any{promptID}, &state); err != nil {
			return err
		}
		if PromptState(state) != PromptInterrupted {
			return nil
		}
		recorded = true
		// The record's seq: the turn's one terminal, the latest of the
		// session's interrupts that names the prompt.
		var at int64
		found, err := storage.QueryRow(tx, `SELECT seq FROM events WHERE session_id = ? AND type = ?
			AND json_extract(data, '$.prompt_id') = ? ORDER BY seq DESC LIMIT 1`,
			[]any{sessionID, string(event.ExecutionInterrupted), promptID}, &at)
		if err != nil || !found {
			return err
		}
		var unended bool
		if _, err := storage.QueryRow(tx, `SELECT EXISTS (SELECT 1 FROM prompts WHERE session_id = ? AND state IN (?, ?) AND admitted_seq <= ?)`,
			[]any{sessionID, string(PromptRunning), string(PromptQueued), at}, &unended); err != nil {
			return err
		}
		settled = !unended
		return nil
	})
	if err != nil {
		return false, false
	}
	return recorded, settled
}

// lastSeq is the session's last event seq.
func (inst *Instance) lastSeq(ctx context.Context, sessionID string) (int64, error) {
	var seq int64
	err := inst.read(ctx, func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?`, []any{sessionID}, &seq)
		return err
	})
	return seq, err
}

// errRunningChanged: the execution running here changed while an interrupt
// waited for storage with the claim lock let go; the interrupt looks again.
var errRunningChanged = errors.New("the session's execution here changed")

// interruptDirect commits an interrupt without the execution's help. The
// caller holds claimMu. x is the execution being stopped, if one runs here.
// A wait for storage lets go of the claim lock, so each attempt checks that
// the execution running here is still x (nil: none); otherwise it fails
// with errRunningChanged, writing nothing, and the caller starts over.
// With rp set, an attempt that finds rp's client id admitted writes
// nothing and ends with errAdmitted (or ErrConflict). With taskPrompt set
// it ends that task turn of a child, running or still queued, and nothing
// else, leaving the prompts a client sent the child queued, with the claim
// (endTaskTurn); a task turn already ended leaves nothing to do.
func (inst *Instance) interruptDirect(ctx context.Context, sessionID, reason string, x *Execution, rp *replacing, taskPrompt string) (bool, error) {
	var did bool
	executionID := ""
	if x != nil {
		executionID = x.id
	}
	w := inst.newWrite()
	w.locked = true
	// Read before each attempt (nothing inside a transaction takes a lock),
	// acted on inside it: a rerun that finds its earlier commit stored (a
	// late IOERR) is done, whatever started since.
	var changed bool
	w.before = func(int) error {
		changed = inst.runningExecution(sessionID) != x
		return inst.armBeforeInterrupt(ctx)
	}
	err := w.run(ctx, func(t *txw) error {
		did = false
		if changed {
			return errRunningChanged
		}
		if x != nil {
			x.recordBegun = true
		}
		if err := t.requireSession(sessionID); err != nil {
			return err
		}
		if err := t.checkReplacing(sessionID, rp); err != nil {
			return err
		}
		var promptID string
		if _, err := storage.QueryRow(t, `SELECT id FROM prompts WHERE session_id = ? AND state = ?`, []any{sessionID, string(PromptRunning)}, &promptID); err != nil {
			return err
		}
		if taskPrompt != "" {
			var taskState string
			if _, err := storage.QueryRow(t, `SELECT state FROM prompts WHERE id = ? AND session_id = ?`, []any{taskPrompt, sessionID}, &taskState); err != nil {
				return err
			}
			switch PromptState(taskState) {
			case PromptRunning:
			case PromptQueued:
				promptID = "" // not started: nothing runs (a task prompt is a child's first)
			default:
				return nil // ended meanwhile; what runs now is the child's own
			}
		}
		claimed, err := t.claims().held(sessionID)
		if err != nil {
			return err
		}
		var queued bool
		if _, err := storage.QueryRow(t, `SELECT EXISTS (SELECT 1 FROM prompts WHERE session_id = ? AND state = ?)`, []any{sessionID, string(PromptQueued)}, &queued); err != nil {
			return err
		}
		if promptID == "" && !claimed && !queued {
			return nil
		}
		did = true
		// An execution stuck here past the grace period was stopped; with
		// none here, the turn's last execution died (or was evicted).
		cut := event.CutInterrupted
		if x != nil {
			cut = event.CutStopped
		}
		var kept map[string]event.Cut
		if x != nil {
			kept = x.keptCuts() // the text a refused cut of x's held
		}
		if taskPrompt != "" {
			taskReason, err := t.taskEndReason(sessionID, promptID)
			if err != nil {
				return err
			}
			_, err = t.endTaskTurn(sessionID, interruption(executionID, promptID, taskReason, cut, kept), taskReason, false)
			return err
		}
		end := interruption(executionID, promptID, reason, cut, kept)
		return t.interruptTurn(sessionID, end, reason)
	})
	if errors.Is(err, errRunningChanged) || errors.Is(err, errAdmitted) {
		return false, err
	}
	if err != nil {
		return false, fmt.Errorf("interrupt session %s: %w", sessionID, err)
	}
	// The turn a storage failure was owed to has ended: the failure is
	// moot (the session holds no claim now, or, after a task turn's end,
	// one for the next turn), and no sweep would write or forget it.
	if did {
		inst.forgetOwed(sessionID)
	}
	return did, nil
}

// interruption is the terminal of an interrupted turn: promptID's, stopped
// (or found dead) in executionID, its open steps cut with reason cut, or
// with the text of kept where storage refused the stopped execution's own
// cut (keptCuts).
func interruption(executionID, promptID, reason, cut string, kept map[string]event.Cut) turnEnd {
	return turnEnd{promptID: promptID, typ: event.ExecutionInterrupted, cut: cut, kept: kept,
		payload: event.Interrupted{ExecutionID: executionID, PromptID: promptID, Reason: reason}}
}

// interruptTurn records end, the interrupt of the running prompt (none if
// end.promptID is empty), cancelling its pending blockers, then cancels
// every queued prompt with reason and releases the claim, in one
// transaction.
func (t *txw) interruptTurn(sessionID string, end turnEnd, reason string) error {
	_, err := t.interruptQueue(sessionID, end, reason, wholeQueue, false)
	return err
}

// wholeQueue is the cutoff of an interrupt that cancels every queued prompt:
// above every seq, and exact as a float64, as the Durable Object's SQL
// binds integers as JS numbers and refuses one it would round
// (math.MaxInt64 would be).
const wholeQueue = 1 << 62

// interruptQueue is interruptTurn cancelling only the queued prompts
// admitted up to seq upTo (all of them with wholeQueue, none with 0): an
// interrupt recorded after its requests gave up
// (Execution.interruptCutoff). Prompts admitted later keep the claim, and
// the next of them starts here if startNext.
func (t *txw) interruptQueue(sessionID string, end turnEnd, reason string, upTo int64, startNext bool) (*plan, error) {
	if err := t.endRunning(sessionID, end); err != nil {
		return nil, err
	}
	rows, err := t.Query(`SELECT id FROM prompts WHERE session_id = ? AND state = ? AND admitted_seq <= ?
		ORDER BY admitted_seq`, sessionID, string(PromptQueued), upTo)
	if err != nil {
		return nil, fmt.Errorf("cancel queued prompts: %w", err)
	}
	if err := t.cancelPrompts(sessionID, rows, reason); err != nil {
		return nil, err
	}
	// Nothing is left queued unless upTo spared it: then the claim is
	// released, as an interrupt's always was.
	if startNext {
		return t.beginExecution(sessionID, event.CausePrompt)
	}
	return nil, t.claimForQueue(sessionID, true)
}

// endRunning records end unless it names no prompt, cancelling the
// prompt's pending blockers first.
func (t *txw) endRunning(sessionID string, end turnEnd) error {
	if end.promptID == "" {
		return nil
	}
	if err := t.cancelBlockers(sessionID, `prompt_id = ?2`, event.CancelInterrupt, end.promptID); err != nil {
		return err
	}
	return t.appendEnd(sessionID, end)
}

// cancelPrompts cancels the prompts whose ids rows lists, with reason.
// A child's task prompt cancelled before its turn started ends its job
// (endJobOf): otherwise the parent's call would wait for it for good, or
// its notice never come.
func (t *txw) cancelPrompts(sessionID string, rows *storage.Rows, reason string) error {
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if _, err := t.append(sessionID, event.PromptCancelled, event.Cancelled{PromptID: id, Reason: reason}); err != nil {
			return err
		}
		if err := t.endJobOf(sessionID, id); err != nil {
			return err
		}
	}
	return nil
}
