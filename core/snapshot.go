package core

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/revenantrt/revenant/core/storage"
)

// Status values, derived and never stored (DESIGN §2).
const (
	StatusBusy    = "busy"    // claimed: work is runnable or running
	StatusWaiting = "waiting" // not claimed, a blocker is pending
	StatusIdle    = "idle"
)

// Snapshot is a consistent view of one session, read in one transaction.
type Snapshot struct {
	Session  Session
	Status   string
	Cursor   int64 // the session's last seq
	Claim    *ClaimInfo
	Messages []Message
	// MoreBefore is set when older messages exist than the first returned.
	MoreBefore bool
	// Prompts lists the prompts not yet ended (queued or running).
	Prompts []PromptInfo
	// Blockers are the session's own pending blockers, oldest first (a
	// root's list of its whole tree is Instance.Blockers).
	Blockers []Blocker
	// Children are the session's sub-agents (job.go), oldest first.
	Children []ChildInfo
	// ReadOnly is set while the tree serves reads only: its storage would
	// not take writes (DESIGN §8), and writes fail with ErrReadOnly.
	ReadOnly bool
}

// ClaimInfo describes a claim for clients.
type ClaimInfo struct {
	ExecutionID    string
	ClaimedAt      int64
	ResumeAttempts int
	RetryAt        int64
	RunningHere    bool
}

// Message is one transcript entry.
type Message struct {
	ID         string
	Seq        int64
	PromptID   string
	Role       string
	Text       string
	ToolCalls  json.RawMessage // assistant answers that called tools
	ToolCallID string          // tool results
	CreatedAt  int64
	// Partial marks the answer of a step still streaming: its text is what
	// was checkpointed so far, and checkpoint events after the snapshot's
	// cursor extend it.
	Partial bool
}

// PromptInfo is a prompt that has not ended.
type PromptInfo struct {
	ID    string
	State string
	Text  string
}

// Snapshot reads a session's state. Messages are the newest limit ones with
// seq < before (before 0: the newest), returned oldest first.
func (inst *Instance) Snapshot(ctx context.Context, sessionID string, before int64, limit int) (Snapshot, error) {
	var snap Snapshot
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		snap = Snapshot{}
		var err error
		if snap.Session, err = readSession(tx, sessionID); err != nil {
			return err
		}
		if _, err := storage.QueryRow(tx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?`, []any{sessionID}, &snap.Cursor); err != nil {
			return err
		}
		if snap.Claim, err = (claimTable{tx}).info(sessionID); err != nil {
			return err
		}
		if snap.Blockers, err = pendingBlockers(tx, `session_id = ?`, sessionID); err != nil {
			return err
		}
		snap.Status = sessionStatus(snap.Claim != nil, len(snap.Blockers) > 0)
		if snap.Messages, snap.MoreBefore, err = readMessages(tx, sessionID, before, limit); err != nil {
			return err
		}
		if snap.Children, err = readChildren(tx, sessionID); err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT id, state, text FROM prompts WHERE session_id = ? AND state IN (?, ?) ORDER BY admitted_seq`, sessionID, string(PromptQueued), string(PromptRunning))
		if err != nil {
			return err
		}
		for rows.Next() {
			var p PromptInfo
			if err := rows.Scan(&p.ID, &p.State, &p.Text); err != nil {
				return err
			}
			snap.Prompts = append(snap.Prompts, p)
		}
		return nil
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of %s: %w", sessionID, err)
	}
	if snap.Claim != nil {
		snap.Claim.RunningHere = inst.RunningHere(sessionID)
	}
	snap.ReadOnly = inst.ReadOnly()
	return snap, nil
}

func readMessages(tx storage.Tx, sessionID string, before int64, limit int) ([]Message, bool, error) {
	if before <= 0 {
		before = 1 << 62
	}
	rows, err := tx.Query(`SELECT id, seq, prompt_id, role, text, tool_calls, tool_call_id, created_at, partial FROM (
			SELECT id, seq, COALESCE(prompt_id, '') AS prompt_id, role, text, COALESCE(tool_calls, '') AS tool_calls,
				COALESCE(tool_call_id, '') AS tool_call_id, created_at, 0 AS partial
			FROM messages WHERE session_id = ?1 AND seq < ?2
			UNION ALL
			SELECT s.id, s.started_seq, s.prompt_id, 'assistant', s.text, '', '', e.at, 1
			FROM steps s JOIN events e ON e.session_id = s.session_id AND e.seq = s.started_seq
			WHERE s.session_id = ?1 AND s.state = ?4 AND s.started_seq < ?2)
		ORDER BY seq DESC, id DESC LIMIT ?3`, sessionID, before, limit+1, string(StepStarted))
	if err != nil {
		return nil, false, err
	}
	var out []Message
	for rows.Next() {
		var m Message
		var calls string
		if err := rows.Scan(&m.ID, &m.Seq, &m.PromptID, &m.Role, &m.Text, &calls, &m.ToolCallID, &m.CreatedAt, &m.Partial); err != nil {
			return nil, false, err
		}
		if calls != "" {
			m.ToolCalls = json.RawMessage(calls)
		}
		out = append(out, m)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, more, nil
}

// Sessions lists a tree's sessions, roots first.
func (inst *Instance) Sessions(ctx context.Context) ([]Session, error) {
	var out []Session
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT id FROM sessions ORDER BY parent_id IS NOT NULL, created_at, id`)
		if err != nil {
			return err
		}
		out = out[:0]
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			s, err := readSession(tx, id)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// sessionStatus derives a session's status, never stored: busy while it has a
// claim, waiting while it has none but a blocker of its own is pending (a turn
// parked on a question), idle otherwise. A session's snapshot and its parent's
// list of children both use it, so the two never disagree.
func sessionStatus(claimed, blocked bool) string {
	switch {
	case claimed:
		return StatusBusy
	case blocked:
		return StatusWaiting
	default:
		return StatusIdle
	}
}
