package core

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// This file holds the foreground task call as a durable waiting call
// (DESIGN §10): the call parks on one blocker of kind task, resolved in the
// child's turn terminal transaction (endJobs), never by a client's reply.
// When it is the last pending blocker of its step, the same transaction
// takes the parent's claim, and the continuation (task@1) settles the call
// with the child's answer, or its failure, as the live wait did. No
// goroutine waits for the child, so a kill anywhere leaves nothing to lose.

// TaskAdapter is the continuation of a task blocker.
const TaskAdapter = "task@1"

// TaskRequest is a task blocker's request: the child it waits for.
type TaskRequest struct {
	ChildID  string `json:"child_id"`
	PromptID string `json:"prompt_id"` // the child's task prompt
}

// TaskBlocker is the blocker a foreground task call parks on: its id is
// deterministic from the minted call id and the ordinal, so a re-run call
// parks the same. ordinal is 0, or the next after the permission request
// the call was approved by: a call's blockers are ordered by ordinal, and
// its continuation is the last one's adapter (task@1, not permission@1).
func TaskBlocker(callID string, ordinal int, c Child) (event.Blocker, error) {
	req, err := json.Marshal(TaskRequest{ChildID: c.ID, PromptID: c.PromptID})
	if err != nil {
		return event.Blocker{}, fmt.Errorf("encode task request: %w", err)
	}
	return event.Blocker{ID: BlockerID("t", callID, ordinal), Kind: event.KindTask, CallID: callID, Ordinal: ordinal, Adapter: TaskAdapter, Request: req}, nil
}

// taskV1 is the task@1 adapter.
type taskV1 struct{}

func init() {
	registerAdapter(taskV1{})
	resolutionStates[event.TaskResolved] = BlockerAnswered
	resolutionStates[event.TaskCancelled] = BlockerCancelled
}

func (taskV1) Name() string            { return TaskAdapter }
func (taskV1) Kind() string            { return event.KindTask }
func (taskV1) CancelEvent() event.Type { return event.TaskCancelled }

// Judge refuses every reply: a sub-agent's turn resolves its blocker.
func (taskV1) Judge(json.RawMessage, Reply) (Verdict, error) {
	return Verdict{}, &Error{Code: ErrConflict, Msg: "a task call waits for its sub-agent's turn to end; it takes no reply"}
}

// Continue settles the call as the live wait did: the child's last answer
// when its turn succeeded, otherwise a tool error saying how it ended.
func (taskV1) Continue(resolved []ResolvedBlocker) Continuation {
	if len(resolved) != 1 || resolved[0].Reply.Child == nil {
		return Continuation{Outcome: event.OutcomeError, Output: "The sub-agent's result could not be read."}
	}
	var req TaskRequest
	_ = json.Unmarshal(resolved[0].Request, &req) // written by TaskBlocker
	res := resolved[0].Reply.Child
	if res.State != PromptSucceeded {
		return Continuation{Outcome: event.OutcomeError, Output: fmt.Sprintf("sub-agent %s: %s", req.ChildID, res.Text)}
	}
	return Continuation{Outcome: event.OutcomeOK, Output: res.Text}
}

// resolveTask resolves the pending task blocker of the parent's call with
// the child's result, if the call is parked on it. When that leaves its
// step with no pending blocker and claim is set, the parent's claim is
// taken (the caller starts it here, or the sweep does with cause
// resolution) and, where the host can, the wake-up armed in this
// transaction. Elsewhere the wake-up that exists for the child's claim
// covers it: the child held a claim until this transaction (a turn
// terminal), and every wake handler re-arms while any claim remains
// (DESIGN §4); an interrupt of a parked child arms before its transaction.
func (t *txw) resolveTask(parentID, callID string, res ChildResult, claim bool) (resolved bool, err error) {
	// The call's pending task blocker, whatever its ordinal (TaskBlocker).
	var id string
	found, err := storage.QueryRow(t, `SELECT id FROM blockers WHERE call_id = ? AND session_id = ? AND kind = ? AND state = 'pending'`,
		[]any{callID, parentID, event.KindTask}, &id)
	if err != nil || !found {
		return false, err
	}
	b, found, err := readBlocker(t, id)
	if err != nil || !found {
		return false, err
	}
	reply, err := encodeReply(Reply{Child: &res})
	if err != nil {
		return false, err
	}
	if _, err := t.append(parentID, event.TaskResolved, event.Resolution{BlockerID: b.ID, CallID: b.CallID, StepID: b.StepID, Reply: reply}); err != nil {
		return false, err
	}
	if !claim {
		return true, nil
	}
	var left bool
	if _, err := storage.QueryRow(t, `SELECT EXISTS (SELECT 1 FROM blockers WHERE step_id = ? AND state = 'pending')`, []any{b.StepID}, &left); err != nil || left {
		return true, err
	}
	_, err = t.claims().take(parentID, t.now())
	return true, err
}

// resolveEndedTasks resolves, right after a step's park was appended, its
// task blockers whose child's turn has ended already (before the park
// committed, or in an earlier life of the tree): the child's terminal found
// no blocker to resolve then.
func (t *txw) resolveEndedTasks(sessionID string, p *event.Parked) error {
	for _, b := range p.Blockers {
		if b.Kind != event.KindTask {
			continue
		}
		var req TaskRequest
		if err := json.Unmarshal(b.Request, &req); err != nil {
			return fmt.Errorf("read task request %s: %w", b.ID, err)
		}
		res, ended, err := readChildResult(t.Tx, req.ChildID, req.PromptID)
		if err != nil {
			return err
		}
		if ended {
			if _, err := t.resolveTask(sessionID, b.CallID, res, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// armBeforeInterrupt arms the wake-up before an interrupt's transaction: the
// interrupt may end a child's turn that held no claim (a parked child), and
// that end may take a claim for someone else: the parent's (resolveTask),
// or the child's own, for a prompt a client sent it (endTaskTurn). Wake
// rule 1 wants the wake-up armed first, under the claim lock the caller
// holds. A spurious wake-up is harmless.
func (inst *Instance) armBeforeInterrupt(ctx context.Context) error {
	if err := inst.host.Wake.Arm(ctx, inst.host.Clock.Now()+inst.cfg.wakeInterval.Milliseconds()); err != nil {
		return fmt.Errorf("arm wake-up: %w", err)
	}
	return nil
}
