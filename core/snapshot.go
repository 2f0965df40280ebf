package core

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

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
	// Text is the prompt's text, cut to PromptTextPreview bytes; Truncated
	// says it was cut.
	Text      string
	Truncated bool
}

// PromptTextPreview is the most of a prompt's text a snapshot carries,
// bytes of UTF-8 cut at a character boundary. A session may queue many
// prompts of up to 256 KiB each, and a snapshot must stay small whatever
// it holds (a Durable Object's isolate has 128 MB): the whole text is in
// the prompt's session.prompt.admitted@1 event and, once its turn starts,
// its user message.
const PromptTextPreview = 1 << 10

// MessagePageBytes bounds the text (text and tool_calls) of a snapshot's
// page of messages: the page stops before the message that would take it
// past this, but holds one message at least, whatever its size.
const MessagePageBytes = 1 << 20

// Snapshot reads a session's state. Messages are the newest limit ones with
// seq < before (before 0: the newest), as many as fit MessagePageBytes,
// returned oldest first.
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
		if snap.Messages, snap.MoreBefore, err = readMessages(tx, sessionID, before, limit, MessagePageBytes); err != nil {
			return err
		}
		if snap.Children, err = readChildren(tx, sessionID); err != nil {
			return err
		}
		snap.Prompts, err = readPrompts(tx, sessionID)
		return err
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

// readPrompts reads a session's prompts not yet ended, each text cut to
// PromptTextPreview. SQL cuts it first, to as many characters (each one
// to four bytes), so that no whole text is read into memory.
func readPrompts(tx storage.Tx, sessionID string) ([]PromptInfo, error) {
	rows, err := tx.Query(`SELECT id, state, substr(text, 1, ?4), octet_length(text) > ?4 FROM prompts
		WHERE session_id = ?1 AND state IN (?2, ?3) ORDER BY admitted_seq`,
		sessionID, string(PromptQueued), string(PromptRunning), PromptTextPreview)
	if err != nil {
		return nil, err
	}
	var out []PromptInfo
	for rows.Next() {
		var p PromptInfo
		if err := rows.Scan(&p.ID, &p.State, &p.Text, &p.Truncated); err != nil {
			return nil, err
		}
		if len(p.Text) > PromptTextPreview {
			p.Text, p.Truncated = cutUTF8(p.Text, PromptTextPreview), true
		}
		out = append(out, p)
	}
	return out, nil
}

// cutUTF8 is s cut to at most n bytes, at a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// transcriptOf is a session's messages with seq < ?2 and seq >= ?3, each
// as msgCols selects it: the messages table's rows, and as stepCols
// selects it, the answer of each step still streaming (s; stepStartedAt is
// the time of its started event); of each, the newest ?5 (by seq, then
// id), which hold the newest ?5 of all. transcript and transcriptSizes
// select the same rows.
//
// The started event's time is a subquery, not a join: with a join on
// events, SQLite ranged over the session's events (every one with seq in
// the page's range) and scanned steps for each, so a snapshot of a session
// with 22,000 events and 940 steps took minutes, holding the tree's
// connection all along and stalling its every request and turn.
//
// Each side keeps only its newest ?5 rows itself, walking its index from
// the newest down: ordered and limited only once joined, the page's
// sizes were read from every message the session had (20,000 messages
// of 2 KB: 700 ms a snapshot, holding the tree's connection;
// BenchmarkSnapshotOfALongTranscript).
func transcriptOf(msgCols, stepCols string) string {
	return `SELECT * FROM (SELECT ` + msgCols + `
	FROM messages WHERE session_id = ?1 AND seq < ?2 AND seq >= ?3 ORDER BY seq DESC, id DESC LIMIT ?5)
	UNION ALL
	SELECT * FROM (SELECT ` + stepCols + `
	FROM steps s
	WHERE s.session_id = ?1 AND s.state = ?4 AND s.started_seq < ?2 AND s.started_seq >= ?3
	ORDER BY s.started_seq DESC, s.id DESC LIMIT ?5)`
}

// stepStartedAt is the time of step s's session.step.started@1 event,
// looked up by its key.
const stepStartedAt = `(SELECT e.at FROM events e WHERE e.session_id = s.session_id AND e.seq = s.started_seq)`

var (
	// transcript is the messages themselves.
	transcript = transcriptOf(`id, seq, COALESCE(prompt_id, '') AS prompt_id, role, text, COALESCE(tool_calls, '') AS tool_calls,
		COALESCE(tool_call_id, '') AS tool_call_id, created_at, 0 AS partial`,
		`s.id, s.started_seq, s.prompt_id, 'assistant', s.text, '', '', `+stepStartedAt+`, 1`)
	// transcriptSizes is their seq, id and size: the bytes of text and
	// tool_calls, which octet_length reads from each row's header, not
	// from its text.
	transcriptSizes = transcriptOf(`seq, id, octet_length(text) + COALESCE(octet_length(tool_calls), 0) AS size`,
		`s.started_seq, s.id, octet_length(s.text)`)

	// pageSizesQuery and pageQuery are readMessages' queries: the newest
	// ?5 rows of transcriptSizes and transcript, newest first.
	pageSizesQuery = `SELECT seq, size FROM (` + transcriptSizes + `)
		ORDER BY seq DESC, id DESC LIMIT ?5`
	pageQuery = `SELECT id, seq, prompt_id, role, text, tool_calls, tool_call_id, created_at, partial FROM (` + transcript + `)
		ORDER BY seq DESC, id DESC LIMIT ?5`
)

// readMessages reads the newest messages with seq < before (0: the
// newest), at most limit and as many as fit maxBytes of text (one at
// least), oldest first; more says older ones exist. It reads the page's
// sizes first (transcriptSizes: no text is read), then the page, in the
// same transaction.
func readMessages(tx storage.Tx, sessionID string, before int64, limit, maxBytes int) ([]Message, bool, error) {
	if before <= 0 {
		before = 1 << 62
	}
	rows, err := tx.Query(pageSizesQuery, sessionID, before, 0, string(StepStarted), limit+1)
	if err != nil {
		return nil, false, err
	}
	page := pageBudget{limit: limit, maxBytes: maxBytes}
	more, from := false, int64(0)
	for rows.Next() {
		var seq int64
		var size int
		if err := rows.Scan(&seq, &size); err != nil {
			return nil, false, err
		}
		if !page.take(size) {
			more = true
			break
		}
		from = seq
	}
	n := page.n
	if n == 0 {
		return nil, false, nil
	}
	// The same order and limit pick the same n rows: the oldest of them
	// has seq from (ties on seq are ordered by id).
	rows, err = tx.Query(pageQuery, sessionID, before, from, string(StepStarted), n)
	if err != nil {
		return nil, false, err
	}
	out := make([]Message, 0, n)
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
