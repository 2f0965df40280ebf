package core

import (
	"encoding/json"
	"fmt"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// ProjectionTables are the tables derived from the event log. Everything
// else in the database (tree, claims, schema_migrations, events itself) is
// bookkeeping that no event describes.
var ProjectionTables = []string{"sessions", "prompts", "messages", "jobs", "steps", "tool_calls", "kv", "blockers", "permission_rules"}

// project applies one event to the projections, inside its append
// transaction. It must be deterministic: Rebuild replays it.
func project(tx storage.Tx, ev event.Event) error {
	var err error
	switch ev.Type {
	case event.SessionCreated:
		var d event.Created
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`INSERT INTO sessions (id, parent_id, root_id, principal, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				ev.SessionID, nullable(d.ParentID), d.RootID, d.Principal, string(d.Config), ev.At, ev.At)
		}
	case event.PromptAdmitted:
		var d event.Admitted
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`INSERT INTO prompts (id, session_id, client_id, body_hash, text, mode, state, admitted_seq, admitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				d.PromptID, ev.SessionID, nullable(d.ClientID), d.BodyHash, d.Text, d.Mode, string(PromptQueued), ev.Seq, ev.At)
			err = touch(tx, ev, err)
		}
	case event.PromptCancelled:
		var d event.Cancelled
		if err = ev.Decode(&d); err == nil {
			err = endPrompt(tx, ev, d.PromptID, PromptCancelled, false)
		}
	case event.MessageAdded:
		var d event.Message
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`INSERT INTO messages (id, session_id, seq, prompt_id, role, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				d.MessageID, ev.SessionID, ev.Seq, nullable(d.PromptID), d.Role, d.Text, ev.At)
			if d.Role != event.RoleNotice { // notices are recovery's, not the user's
				err = touch(tx, ev, err)
			}
		}
	case event.ExecutionStarted:
		var d event.Started
		if err = ev.Decode(&d); err == nil && d.TurnStart {
			_, err = tx.Exec(`UPDATE prompts SET state = ? WHERE id = ?`, string(PromptRunning), d.PromptID)
		}
	case event.ExecutionSucceeded:
		var d event.Succeeded
		if err = ev.Decode(&d); err == nil {
			err = endPrompt(tx, ev, d.PromptID, PromptSucceeded, true)
		}
	case event.ExecutionFailed:
		var d event.Failed
		if err = ev.Decode(&d); err == nil {
			err = endPrompt(tx, ev, d.PromptID, PromptFailed, true)
		}
	case event.ExecutionInterrupted:
		var d event.Interrupted
		if err = ev.Decode(&d); err == nil && d.Reason != event.ReasonShutdown {
			err = endPrompt(tx, ev, d.PromptID, PromptInterrupted, true)
		}
	case event.JobStarted:
		var d event.Job
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`INSERT INTO jobs (child_id, parent_id, call_id, state, background) VALUES (?, ?, ?, ?, ?)`, d.ChildID, ev.SessionID, d.CallID, string(JobRunning), d.Background)
		}
	case event.StepStarted:
		var d event.StepBegun
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`INSERT INTO steps (id, session_id, prompt_id, execution_id, idx, state, started_seq) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				d.StepID, ev.SessionID, d.PromptID, d.ExecutionID, d.Index, string(StepStarted), ev.Seq)
		}
	case event.TextCheckpoint:
		var d event.Checkpoint
		if err = ev.Decode(&d); err == nil {
			// Offset makes a checkpoint applied twice harmless.
			_, err = tx.Exec(`UPDATE steps SET text = substr(text, 1, ?) || ? WHERE id = ?`, d.Offset, d.Text, d.StepID)
		}
	case event.StepCompleted:
		var d event.StepDone
		if err = ev.Decode(&d); err == nil {
			err = projectStepCompleted(tx, ev, d)
		}
	case event.StepCut:
		var d event.Cut
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`UPDATE steps SET state = ?, text = ? WHERE id = ?`, string(StepCut), d.Text, d.StepID)
			if err == nil && d.Text != "" {
				// Placed where the step began, before any continuation notice
				// that the resume added after it.
				_, err = tx.Exec(`INSERT INTO messages (id, session_id, seq, prompt_id, role, text, created_at)
					SELECT id, session_id, started_seq, prompt_id, 'assistant', ?, ? FROM steps WHERE id = ?`, d.Text, ev.At, d.StepID)
			}
		}
	case event.ToolExecuting:
		var d event.Executing
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`UPDATE tool_calls SET phase = ?, idempotency_key = ? WHERE id = ?`, string(event.PhaseExecuting), d.IdempotencyKey, d.CallID)
		}
	case event.ToolSettled:
		var d event.Settled
		if err = ev.Decode(&d); err == nil {
			err = projectToolSettled(tx, ev, d)
		}
	case event.RetryScheduled:
		var d event.Retry
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`UPDATE prompts SET retries = retries + 1, retried_steps = retried_steps + 1 WHERE id = ?`, d.PromptID)
		}
	case event.StepParked:
		var d event.Parked
		if err = ev.Decode(&d); err == nil {
			err = projectParked(tx, ev, d)
		}
	case event.PermissionRuleSaved:
		var d event.RuleSaved
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`INSERT INTO permission_rules (id, session_id, blocker_id, action, resource, decision, exact, saved_seq, saved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				d.RuleID, ev.SessionID, d.BlockerID, d.Action, d.Resource, d.Decision, d.Exact, ev.Seq, ev.At)
		}
	case event.QuestionAnswered, event.QuestionCancelled, event.PermissionApproved, event.PermissionRejected, event.PermissionCancelled:
		var d event.Resolution
		if err = ev.Decode(&d); err == nil {
			err = projectResolution(tx, ev, d)
		}
	case event.JobEnded:
		var d event.Job
		if err = ev.Decode(&d); err == nil {
			_, err = tx.Exec(`UPDATE jobs SET state = ? WHERE child_id = ?`, string(JobEnded), d.ChildID)
		}
	case event.TaskResolved, event.TaskCancelled:
		var d event.Resolution
		if err = ev.Decode(&d); err == nil {
			err = projectResolution(tx, ev, d)
		}
	}
	if err != nil {
		return fmt.Errorf("project %s seq %d: %w", ev.Type, ev.Seq, err)
	}
	return nil
}

func projectStepCompleted(tx storage.Tx, ev event.Event, d event.StepDone) error {
	if _, err := tx.Exec(`UPDATE steps SET state = ?, text = ?, finish = ? WHERE id = ?`, string(StepCompleted), d.Text, d.Finish, d.StepID); err != nil {
		return err
	}
	if _, err := tx.Exec(`UPDATE prompts SET retries = 0 WHERE id = (SELECT prompt_id FROM steps WHERE id = ?)`, d.StepID); err != nil {
		return err
	}
	var calls any
	if len(d.ToolCalls) > 0 {
		b, err := json.Marshal(d.ToolCalls)
		if err != nil {
			return err
		}
		calls = string(b)
	}
	// The answer is placed in the transcript where its step began.
	if _, err := tx.Exec(`INSERT INTO messages (id, session_id, seq, prompt_id, role, text, created_at, tool_calls)
		SELECT id, session_id, started_seq, prompt_id, 'assistant', ?, ?, ? FROM steps WHERE id = ?`, d.Text, ev.At, calls, d.StepID); err != nil {
		return err
	}
	for _, c := range d.ToolCalls {
		if _, err := tx.Exec(`INSERT INTO tool_calls (id, session_id, step_id, idx, name, arguments, phase) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.CallID, ev.SessionID, d.StepID, c.Index, c.Name, c.Arguments, string(event.PhaseCalled)); err != nil {
			return err
		}
	}
	return touch(tx, ev, nil)
}

func projectToolSettled(tx storage.Tx, ev event.Event, d event.Settled) error {
	if _, err := tx.Exec(`UPDATE tool_calls SET phase = ?, outcome = ?, output = ?, ran = ? WHERE id = ?`, string(event.PhaseSettled), d.Outcome, d.Output, d.Ran, d.CallID); err != nil {
		return err
	}
	for _, put := range d.KVPuts {
		if _, err := tx.Exec(`INSERT INTO kv (key, value, updated_seq, session_id) VALUES (?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_seq = excluded.updated_seq, session_id = excluded.session_id`,
			put.Key, put.Value, ev.Seq, ev.SessionID); err != nil {
			return err
		}
	}
	var name string
	if _, err := storage.QueryRow(tx, `SELECT name FROM tool_calls WHERE id = ?`, []any{d.CallID}, &name); err != nil {
		return err
	}
	_, err := tx.Exec(`INSERT INTO messages (id, session_id, seq, role, text, created_at, tool_call_id, name) VALUES (?, ?, ?, 'tool', ?, ?, ?, ?)`,
		d.CallID+".result", ev.SessionID, ev.Seq, d.Output, ev.At, d.CallID, name)
	return err
}

// blockerChild is the child a task blocker waits for (nil for other
// kinds): kept in its own column so the claim query reads no JSON.
func blockerChild(b event.Blocker) (any, error) {
	if b.Kind != event.KindTask {
		return nil, nil
	}
	var req TaskRequest
	if err := json.Unmarshal(b.Request, &req); err != nil {
		return nil, fmt.Errorf("read task request %s: %w", b.ID, err)
	}
	return req.ChildID, nil
}

// projectParked inserts the step's blockers, pending, and puts their calls
// in the waiting phase.
func projectParked(tx storage.Tx, ev event.Event, d event.Parked) error {
	for _, b := range d.Blockers {
		childID, err := blockerChild(b)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO blockers (id, session_id, root_id, prompt_id, step_id, call_id, kind, adapter, ordinal, state, request, created_seq, created_at, child_id)
			SELECT ?, ?, root_id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM sessions WHERE id = ?`,
			b.ID, ev.SessionID, d.PromptID, d.StepID, b.CallID, b.Kind, b.Adapter, b.Ordinal, BlockerPending, string(b.Request), ev.Seq, ev.At,
			childID, ev.SessionID); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE tool_calls SET phase = ? WHERE id = ?`, string(event.PhaseWaiting), b.CallID); err != nil {
			return err
		}
	}
	return touch(tx, ev, nil)
}

// projectResolution resolves one blocker with the state its event type
// stands for. Only a pending blocker moves: the reply's compare-and-set
// decided before appending, and a replay must not let a later event win.
func projectResolution(tx storage.Tx, ev event.Event, d event.Resolution) error {
	state, ok := resolutionStates[ev.Type]
	if !ok {
		return fmt.Errorf("no blocker state for %s", ev.Type)
	}
	if _, err := tx.Exec(`UPDATE blockers SET state = ?, response_id = ?, reply = ?, reason = ?, resolved_at = ? WHERE id = ? AND state = ?`,
		state, nullable(d.ResponseID), nullable(string(d.Reply)), nullable(d.Reason), ev.At, d.BlockerID, BlockerPending); err != nil {
		return err
	}
	return touch(tx, ev, nil)
}

// endPrompt records a prompt's end. Turn terminals also count the turn.
func endPrompt(tx storage.Tx, ev event.Event, promptID string, state PromptState, turn bool) error {
	if _, err := tx.Exec(`UPDATE prompts SET state = ?, outcome = ?, ended_at = ? WHERE id = ?`, string(state), string(ev.Data), ev.At, promptID); err != nil {
		return err
	}
	if turn {
		if _, err := tx.Exec(`UPDATE sessions SET turns = turns + 1 WHERE id = ?`, ev.SessionID); err != nil {
			return err
		}
	}
	return touch(tx, ev, nil)
}

// touch moves the session's updated_at. Only events a user would call a
// change do this; claim bookkeeping (starts, resumes, continuation notices,
// shutdown stops) never does.
func touch(tx storage.Tx, ev event.Event, prior error) error {
	if prior != nil {
		return prior
	}
	_, err := tx.Exec(`UPDATE sessions SET updated_at = ? WHERE id = ?`, ev.At, ev.SessionID)
	return err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Rebuild empties the projection tables and replays the whole event log into
// them in commit order (gseq): the kv store is shared by the whole tree, so
// the order of writes across sessions matters there.
func Rebuild(tx storage.Tx) error {
	for _, t := range ProjectionTables {
		if _, err := tx.Exec(`DELETE FROM ` + t); err != nil {
			return fmt.Errorf("rebuild: clear %s: %w", t, err)
		}
	}
	rows, err := tx.Query(`SELECT id, session_id, seq, type, at, data FROM events ORDER BY gseq IS NOT NULL, gseq, session_id, seq`)
	if err != nil {
		return fmt.Errorf("rebuild: read log: %w", err)
	}
	for rows.Next() {
		var ev event.Event
		var typ, data string
		if err := rows.Scan(&ev.ID, &ev.SessionID, &ev.Seq, &typ, &ev.At, &data); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
		ev.Type, ev.Data = event.Type(typ), []byte(data)
		if err := project(tx, ev); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
	}
	return nil
}
