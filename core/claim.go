package core

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/revenantrt/revenant/core/storage"
)

// This file holds every statement on the claims table (DESIGN §2 Claim,
// §6), so the claim's life can be read in one place:
//
//	take          claimed if not already, no execution yet: a prompt
//	              admitted, a reply or a child's end resolving a parked
//	              turn, a parked child's task turn ended for its own prompt
//	startTurn     a new turn's first execution: the claim taken afresh
//	attach        a continuing turn's next execution (a resume, a retry come due)
//	retake        a turn ended, a queued prompt waits: held afresh, no execution
//	sleepUntil    the turn sleeps on a scheduled provider retry
//	countAttempt  recovery counts a resume, before anything of it runs
//	resetAttempts progress was recorded
//	release       no work left
//
// "Afresh" means resume_attempts 0 and claimed_at now, so no turn inherits
// another's count or age. No claim write moves the session's updated_at.
// Every write runs inside the transaction that makes the change it
// describes; the reads serve the fence, recovery, snapshots and the
// wake-up.

// claimTable is the claims table seen from one transaction.
type claimTable struct{ tx storage.Tx }

// claims is the claims table inside t's transaction.
func (t *txw) claims() claimTable { return claimTable{t.Tx} }

// take claims the session if no claim exists and reports whether this call
// took it; an existing claim (and its execution) is left as it is.
func (c claimTable) take(sessionID string, now int64) (bool, error) {
	n, err := c.tx.Exec(`INSERT INTO claims (session_id, claimed_at, resume_attempts) VALUES (?, ?, 0) ON CONFLICT (session_id) DO NOTHING`, sessionID, now)
	if err != nil {
		return false, fmt.Errorf("take claim: %w", err)
	}
	return n == 1, nil
}

// startTurn puts a new turn's first execution on the claim, taking the claim
// afresh (or taking it, if the session had none).
func (c claimTable) startTurn(sessionID, executionID string, now int64) error {
	_, err := c.tx.Exec(`INSERT INTO claims (session_id, execution_id, claimed_at, resume_attempts) VALUES (?, ?, ?, 0)
			ON CONFLICT (session_id) DO UPDATE SET execution_id = excluded.execution_id, claimed_at = excluded.claimed_at, resume_attempts = 0, retry_at = NULL`,
		sessionID, executionID, now)
	if err != nil {
		return fmt.Errorf("put execution on claim: %w", err)
	}
	return nil
}

// attach puts a continuing turn's next execution on the claim, keeping its
// age and resume count and ending any retry sleep.
func (c claimTable) attach(sessionID, executionID string) error {
	if _, err := c.tx.Exec(`UPDATE claims SET execution_id = ?, retry_at = NULL WHERE session_id = ?`, executionID, sessionID); err != nil {
		return fmt.Errorf("put execution on claim: %w", err)
	}
	return nil
}

// retake keeps the claim, afresh and without an execution, for a queued
// prompt whose turn this instance does not start (it is stopping): the next
// boot starts that turn without counting a resume.
func (c claimTable) retake(sessionID string, now int64) error {
	if _, err := c.tx.Exec(`UPDATE claims SET execution_id = NULL, resume_attempts = 0, retry_at = NULL, claimed_at = ? WHERE session_id = ?`, now, sessionID); err != nil {
		return fmt.Errorf("keep claim for the next turn: %w", err)
	}
	return nil
}

// sleepUntil records that the claim's turn sleeps until at (ms). The claim
// keeps its execution id; recovery sees retry_at and waits.
func (c claimTable) sleepUntil(sessionID string, at int64) error {
	if _, err := c.tx.Exec(`UPDATE claims SET retry_at = ? WHERE session_id = ?`, at, sessionID); err != nil {
		return fmt.Errorf("schedule retry: %w", err)
	}
	return nil
}

// countAttempt stores the resume count recovery decided.
func (c claimTable) countAttempt(sessionID string, attempt int) error {
	if _, err := c.tx.Exec(`UPDATE claims SET resume_attempts = ? WHERE session_id = ?`, attempt, sessionID); err != nil {
		return fmt.Errorf("count attempt: %w", err)
	}
	return nil
}

// resetAttempts zeroes the resume count: the turn made progress.
func (c claimTable) resetAttempts(sessionID string) error {
	if _, err := c.tx.Exec(`UPDATE claims SET resume_attempts = 0 WHERE session_id = ?`, sessionID); err != nil {
		return fmt.Errorf("reset resume count: %w", err)
	}
	return nil
}

// release drops the claim: the session has no runnable work left.
func (c claimTable) release(sessionID string) error {
	if _, err := c.tx.Exec(`DELETE FROM claims WHERE session_id = ?`, sessionID); err != nil {
		return fmt.Errorf("release claim: %w", err)
	}
	return nil
}

// attempts reads the claim's resume count into n (left alone without a
// claim). Like wakes, it scans into the caller's variables: a scan
// destination always escapes, and the caller's usually has already.
func (c claimTable) attempts(sessionID string, n *int) error {
	if _, err := storage.QueryRow(c.tx, `SELECT resume_attempts FROM claims WHERE session_id = ?`, []any{sessionID}, n); err != nil {
		return fmt.Errorf("read resume count: %w", err)
	}
	return nil
}

// execution reads the execution id on the session's claim: found is false
// without a claim, and the id is empty while no execution has started.
func (c claimTable) execution(sessionID string) (executionID string, found bool, err error) {
	found, err = storage.QueryRow(c.tx, `SELECT COALESCE(execution_id, '') FROM claims WHERE session_id = ?`, []any{sessionID}, &executionID)
	return executionID, found, err
}

// held reports whether the session is claimed.
func (c claimTable) held(sessionID string) (bool, error) {
	var held bool
	_, err := storage.QueryRow(c.tx, `SELECT EXISTS (SELECT 1 FROM claims WHERE session_id = ?)`, []any{sessionID}, &held)
	return held, err
}

// fence reads, in one statement (it runs before every write), the tree's
// epoch and the session's claim: whether it exists and the execution it
// names. An empty sessionID reads the epoch only.
func (c claimTable) fence(sessionID string) (epoch int64, executionID string, held bool, err error) {
	q := `SELECT (SELECT epoch FROM tree), (SELECT COALESCE(execution_id, '') FROM claims WHERE session_id = ?), EXISTS (SELECT 1 FROM claims WHERE session_id = ?)`
	_, err = storage.QueryRow(c.tx, q, []any{sessionID, sessionID}, &epoch, &executionID, &held)
	return epoch, executionID, held, err
}

// info reads the session's claim for a snapshot; nil without a claim.
func (c claimTable) info(sessionID string) (*ClaimInfo, error) {
	var ci ClaimInfo
	var retry sql.NullInt64
	found, err := storage.QueryRow(c.tx, `SELECT COALESCE(execution_id, ''), claimed_at, resume_attempts, retry_at FROM claims WHERE session_id = ?`,
		[]any{sessionID}, &ci.ExecutionID, &ci.ClaimedAt, &ci.ResumeAttempts, &retry)
	if err != nil || !found {
		return nil, err
	}
	ci.RetryAt = retry.Int64
	return &ci, nil
}

// wakes reads what the wake-up must cover at now: how many claims are not
// sleeping on a retry still ahead (none scheduled, or one already due that
// no sweep has started), and the earliest retry time ahead, if any.
func (c claimTable) wakes(now int64, others *int, earliestRetry *sql.NullInt64) error {
	_, err := storage.QueryRow(c.tx, `SELECT count(*) FILTER (WHERE retry_at IS NULL OR retry_at <= ?1), MIN(retry_at) FILTER (WHERE retry_at > ?1) FROM claims`, []any{now}, others, earliestRetry)
	return err
}

// ClaimState is what recovery needs to decide about one claim.
type ClaimState struct {
	SessionID   string
	ParentID    string // empty for a root
	ExecutionID string // empty if no execution ever started under this claim
	PromptID    string // the running prompt, if any
	ClaimedAt   int64
	Attempts    int   // resume_attempts
	RetryAt     int64 // 0 unless sleeping on a scheduled retry
	JobLive     bool  // a running job row or a waiting parent call names this (child) session
	// OwnTurn: the claim's turn (its running prompt, else its oldest queued
	// one) is the session's own, not a task call's: its prompt is not the
	// one a job row of its parent names (client id task-{call}), so a
	// client sent it (or it is a notice of the session's own background
	// child). False when the claim has no prompt at all.
	OwnTurn     bool
	RunningHere bool
}

// Claims lists every claim with what recovery needs, oldest claim first.
func (inst *Instance) Claims(ctx context.Context) ([]ClaimState, error) {
	var out []ClaimState
	err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		var err error
		out, err = claimTable{tx}.list()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	for i := range out {
		out[i].RunningHere = inst.RunningHere(out[i].SessionID)
	}
	return out, nil
}

// list reads every claim's state, oldest claim first. RunningHere is left
// to the caller: the database cannot know it.
func (c claimTable) list() ([]ClaimState, error) {
	rows, err := c.tx.Query(claimQuery+` ORDER BY c.claimed_at, c.session_id`, claimQueryArgs()...)
	if err != nil {
		return nil, err
	}
	var out []ClaimState
	for rows.Next() {
		cs, err := scanClaim(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

// state reads one session's claim state; found is false without a claim.
func (c claimTable) state(sessionID string) (cs ClaimState, found bool, err error) {
	rows, err := c.tx.Query(claimQuery+` WHERE c.session_id = ?`, append(claimQueryArgs(), sessionID)...)
	if err != nil || !rows.Next() {
		return cs, false, err
	}
	cs, err = scanClaim(rows)
	return cs, err == nil, err
}

// claimQuery reads ClaimState rows; its parameters are claimQueryArgs,
// then those of any WHERE appended.
const claimQuery = `SELECT c.session_id, COALESCE(s.parent_id, ''), COALESCE(c.execution_id, ''),
	COALESCE((SELECT p.id FROM prompts p WHERE p.session_id = c.session_id AND p.state = ?), ''),
	c.claimed_at, c.resume_attempts, c.retry_at,
	EXISTS (SELECT 1 FROM jobs j WHERE j.child_id = c.session_id AND j.state = ?)
		OR EXISTS (SELECT 1 FROM blockers b WHERE b.child_id = c.session_id AND b.state = 'pending'),
	COALESCE((SELECT NOT EXISTS (SELECT 1 FROM jobs j WHERE j.child_id = t.session_id AND t.client_id = 'task-' || j.call_id)
		FROM prompts t WHERE t.session_id = c.session_id AND t.state IN (?, ?)
		ORDER BY t.state = ? DESC, t.admitted_seq LIMIT 1), 0)
	FROM claims c LEFT JOIN sessions s ON s.id = c.session_id`

// claimQueryArgs are claimQuery's own parameters: the running prompt, the
// live job, and the claim's turn (running first, else oldest queued).
func claimQueryArgs() []any {
	return []any{string(PromptRunning), string(JobRunning), string(PromptRunning), string(PromptQueued), string(PromptRunning)}
}

func scanClaim(rows *storage.Rows) (ClaimState, error) {
	var c ClaimState
	var retry sql.NullInt64
	err := rows.Scan(&c.SessionID, &c.ParentID, &c.ExecutionID, &c.PromptID, &c.ClaimedAt, &c.Attempts, &retry, &c.JobLive, &c.OwnTurn)
	c.RetryAt = retry.Int64
	return c, err
}
