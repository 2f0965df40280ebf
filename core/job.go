package core

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// This file holds sub-agents (DESIGN §10): a task call's child session, its
// job row in the parent's log, and how the child's end reaches the parent.
//
//	StartChild   the parent's task call creates (or re-attaches to) its child
//	             with the child's first prompt and claim, in one fenced
//	             transaction of the parent's execution
//	TaskBlocker  a foreground call parks on its child (taskwait.go); the
//	             child's turn terminal resolves it
//	endJobs      in every turn terminal's own transaction (appendEnd): a
//	             child's job ends with its task turn, a background child's
//	             notice is admitted to the parent's queue, and a parent whose
//	             turn ends lets go of its foreground children
//
// The child's id is {root}.{n}, n counting the tree's children from 1; it is
// chosen in the transaction that first records the call's job, and the job
// row keeps it for that call id, so a re-run call re-attaches.

// DefaultTaskDepth is how deep sub-agents may nest unless configured: a root
// is depth 0, its children depth 1.
const DefaultTaskDepth = 3

// DefaultMaxSubagents is how many child sessions one tree may hold, at all
// depths together, unless configured. Each child runs its own turns on its
// own step cap, so breadth is what multiplies a single prompt's model
// requests: without a bound one prompt asking for children that each ask
// for more made over a thousand children in seconds. 64 is far above what
// a task plausibly splits into (a few children, each with a few of its own:
// 4 per level at depth 3 is 84, 3 per level 39), and bounds a prompt's
// worst case to about 64 × the step cap (100) requests beside the root's.
const DefaultMaxSubagents = 64

// ChildSpec is a task call's request for a sub-agent.
type ChildSpec struct {
	CallID     string // the parent's minted call id: the child belongs to it
	Prompt     string
	Background bool
	MaxDepth   int // the deepest a child may be (a root is 0); 0 allows none
	// MaxChildren is how many child sessions the tree may hold, at all
	// depths together, counting every child it ever had (a tree's children
	// are deleted only with the tree); 0 allows none.
	MaxChildren int
}

// Child is a task call's sub-agent.
type Child struct {
	ID       string
	PromptID string // the child's task prompt
	Attached bool   // the call had its child already: re-attached, nothing written
}

// ChildResult is how a child's task turn ended.
type ChildResult struct {
	State PromptState `json:"state"` // succeeded, failed, interrupted (or cancelled)
	Text  string      `json:"text"`  // the last answer if succeeded; otherwise what ended it
}

// TaskClientID is the client id of a child's task prompt: one per call.
func TaskClientID(callID string) string { return "task-" + callID }

// NoticeClientID is the client id of a background child's completion notice
// in its parent's queue: stable per child turn, so the first admission wins.
func NoticeClientID(childID string, turn int) string {
	return fmt.Sprintf("notice-%s-%d", childID, turn)
}

// noticeIDPrefix begins the client id of every notice any session of
// sessionID's tree may be sent: a child's id is its root's (the session id
// up to its first dot), a dot and a number, at every depth, so a
// grandchild's notice to its parent is named after the root too. Admit
// refuses client ids with it in every session of the tree: a client's
// prompt holding a notice's id, which the snapshot's child ids and turns
// let anyone compute, would make the child's turn end conflict with it for
// good. (A root id with a dot, possible only through the library, makes
// the prefix broader than the tree's own, never narrower.)
func noticeIDPrefix(sessionID string) string {
	root, _, _ := strings.Cut(sessionID, ".")
	return "notice-" + root + "."
}

// StartChild creates the call's child session with its task prompt and
// claim, and the job row in the parent's log, in one transaction fenced on
// x, then starts the child's turn here. A call that has its child already
// re-attaches to it and writes nothing. An empty prompt, a depth past the
// limit or a tree holding MaxChildren children already is ErrInvalid, with
// nothing written. The limits are checked in the transaction that would
// record the child, against counts that never go down (a session's
// ancestors, the tree's children), so a call refused stays refused when a
// kill makes its turn run it again, and a call that got its child keeps it.
func (x *Execution) StartChild(ctx context.Context, spec ChildSpec) (Child, error) {
	if strings.TrimSpace(spec.Prompt) == "" {
		return Child{}, invalid("task: the prompt is empty")
	}
	inst := x.inst
	inst.claimMu.Lock()
	defer inst.claimMu.Unlock()
	// Wake rule 1, as in Admit: the child's claim commits with a wake-up armed.
	w := inst.claimingWrite(ctx)
	w.fence = &fence{sessionID: x.sessionID, executionID: x.id}
	var c Child
	err := w.run(ctx, func(t *txw) error {
		c = Child{}
		found, err := t.childOfCall(x.sessionID, spec.CallID, &c)
		if err != nil || found {
			return err
		}
		return t.createChild(x.sessionID, spec, &c)
	})
	if err != nil {
		return Child{}, fmt.Errorf("start child: %w", err)
	}
	// A new child's turn starts here; a re-attached one is running, ended,
	// or left to the sweep (its execution died), which startLocked leaves be.
	inst.startLocked(ctx, c.ID, event.CausePrompt)
	return c, nil
}

// childOfCall finds the child a parent's call already has.
func (t *txw) childOfCall(parentID, callID string, c *Child) (bool, error) {
	found, err := storage.QueryRow(t, `SELECT j.child_id, COALESCE(p.id, '') FROM jobs j
		LEFT JOIN prompts p ON p.session_id = j.child_id AND p.client_id = ?
		WHERE j.parent_id = ? AND j.call_id = ?`, []any{TaskClientID(callID), parentID, callID}, &c.ID, &c.PromptID)
	if err != nil {
		return false, fmt.Errorf("find child of call %s: %w", callID, err)
	}
	c.Attached = found
	return found, nil
}

// createChild writes a new child: session.created in its log, the job in
// the parent's, the task prompt and the child's claim.
func (t *txw) createChild(parentID string, spec ChildSpec, c *Child) error {
	parent, err := t.session(parentID)
	if err != nil {
		return err
	}
	depth, err := t.depth(parent)
	if err != nil {
		return err
	}
	if depth+1 > spec.MaxDepth {
		return invalid("task: sub-agents may nest %d deep, and this session is at depth %d already", spec.MaxDepth, depth)
	}
	var n int
	if _, err := storage.QueryRow(t, `SELECT count(*) FROM sessions WHERE root_id = ? AND parent_id IS NOT NULL`, []any{parent.RootID}, &n); err != nil {
		return fmt.Errorf("count children: %w", err)
	}
	if n >= spec.MaxChildren {
		return invalid("task: this session tree already has %s, the most it may hold (max_subagents %d); no sub-agent was started, so do the work without one", subAgents(n), spec.MaxChildren)
	}
	c.ID = fmt.Sprintf("%s.%d", parent.RootID, n+1)
	if _, err := t.append(c.ID, event.SessionCreated, event.Created{ParentID: parent.ID, RootID: parent.RootID, Principal: parent.Principal, Config: parent.Config}); err != nil {
		return err
	}
	if _, err := t.append(parentID, event.JobStarted, event.Job{ChildID: c.ID, CallID: spec.CallID, Background: spec.Background}); err != nil {
		return err
	}
	in := PromptInput{ClientID: TaskClientID(spec.CallID), Text: spec.Prompt, Mode: event.ModeQueue}
	c.PromptID = t.id()
	if _, err := t.append(c.ID, event.PromptAdmitted, event.Admitted{PromptID: c.PromptID, ClientID: in.ClientID, Text: in.Text, Mode: in.Mode, BodyHash: bodyHash(in)}); err != nil {
		return err
	}
	_, err = t.claims().take(c.ID, t.now())
	return err
}

// subAgents counts sub-agents in words for the limit's message, which the
// model and the user both read: "1 sub-agent", "2 sub-agents".
func subAgents(n int) string {
	if n == 1 {
		return "1 sub-agent"
	}
	return fmt.Sprintf("%d sub-agents", n)
}

// depth counts a session's ancestors.
func (t *txw) depth(s Session) (int, error) {
	d := 0
	for id := s.ParentID; id != ""; d++ {
		if _, err := storage.QueryRow(t, `SELECT COALESCE(parent_id, '') FROM sessions WHERE id = ?`, []any{id}, &id); err != nil {
			return 0, fmt.Errorf("read depth: %w", err)
		}
	}
	return d, nil
}

// readChildResult reads how the child's prompt ended, if it has.
func readChildResult(tx storage.Tx, childID, promptID string) (ChildResult, bool, error) {
	var state, outcome string
	found, err := storage.QueryRow(tx, `SELECT state, COALESCE(outcome, '') FROM prompts WHERE id = ? AND session_id = ?`, []any{promptID, childID}, &state, &outcome)
	if err != nil {
		return ChildResult{}, false, fmt.Errorf("read child result: %w", err)
	}
	if !found {
		return ChildResult{}, false, fmt.Errorf("child %s task prompt %s: %w", childID, promptID, ErrNotFound)
	}
	res := ChildResult{State: PromptState(state)}
	switch res.State {
	case PromptQueued, PromptRunning:
		return res, false, nil
	case PromptSucceeded:
		_, err = storage.QueryRow(tx, `SELECT text FROM messages WHERE session_id = ? AND prompt_id = ? AND role = 'assistant' ORDER BY seq DESC LIMIT 1`,
			[]any{childID, promptID}, &res.Text)
	case PromptFailed:
		var f event.Failed
		if jerr := (event.Event{Data: []byte(outcome)}).Decode(&f); jerr == nil {
			res.Text = fmt.Sprintf("The sub-agent's turn failed (%s): %s", f.Type, f.Message)
		}
	default:
		res.Text = fmt.Sprintf("The sub-agent's turn ended %s.", state)
	}
	return res, true, err
}

// endJobs is the sub-agent part of every turn terminal, run in the
// terminal's own transaction after it was appended (and projected):
//   - the session's foreground jobs end: no call of the ended turn waits for
//     those children any more, and the sweep releases what they leave;
//   - if the session is a child whose task turn this is, its job ends in the
//     parent's log and, for a background child, its completion notice is
//     admitted to the parent's queue under NoticeClientID (first admission
//     wins) with the parent's claim; for a foreground child, the parent's
//     waiting call is resolved with the child's result (taskwait.go), with
//     the parent's claim if that was its step's last blocker.
//
// Being in the terminal's transaction, the notice or the resolution is
// delivered exactly when the terminal is stored: a storage outage delays
// both (write schedule, then settlement schedule), a kill before leaves
// both to the resumed child. The parent's claim needs no wake-up of its
// own: the child's claim is released in this same transaction, so the tree
// never is without one, and every wake handler re-arms while any claim
// remains (DESIGN §4); where the child held none (an interrupt of a parked
// child) the interrupt armed one first (armBeforeInterrupt).
func (t *txw) endJobs(sessionID string, end turnEnd) error {
	if err := t.endForegroundJobs(sessionID, end); err != nil {
		return err
	}
	return t.endJobOf(sessionID, end.promptID)
}

// endJobOf ends the running job whose task prompt is the session's
// promptID, now ended: by its turn's terminal (endJobs), or cancelled
// before its turn started (cancelPrompts: an interrupt or a replacing
// prompt sent to the child while its task prompt still waited in the
// queue, which ends no turn). The parent's waiting call is resolved, or
// its notice admitted, as endJobs says. Nothing if no running job names
// the prompt: not a task prompt, or its job already ended (the parent's
// turn ended it, endForegroundJobs).
func (t *txw) endJobOf(sessionID, promptID string) error {
	var parentID, callID string
	var background bool
	found, err := storage.QueryRow(t, `SELECT j.parent_id, j.call_id, j.background
		FROM jobs j JOIN prompts p ON p.session_id = j.child_id AND p.client_id = 'task-' || j.call_id
		WHERE j.child_id = ? AND j.state = ? AND p.id = ?`, []any{sessionID, string(JobRunning), promptID}, &parentID, &callID, &background)
	if err != nil || !found {
		return err
	}
	if _, err := t.append(parentID, event.JobEnded, event.Job{ChildID: sessionID, CallID: callID, Background: background}); err != nil {
		return err
	}
	res, _, err := readChildResult(t.Tx, sessionID, promptID)
	if err != nil {
		return err
	}
	if !background {
		// The parent's call waits on its task blocker (taskwait.go).
		_, err := t.resolveTask(parentID, callID, res, true)
		return err
	}
	var turn int
	if _, err := storage.QueryRow(t, `SELECT turns FROM sessions WHERE id = ?`, []any{sessionID}, &turn); err != nil {
		return err
	}
	text := fmt.Sprintf("The background sub-agent %s finished (%s):\n%s", sessionID, res.State, res.Text)
	return t.admitNotice(parentID, NoticeClientID(sessionID, turn), text)
}

// endForegroundJobs ends the running foreground jobs of a session whose turn
// ends, and in the same transaction ends the task turns of those children
// that are parked (they run nowhere, so nothing else would): no call waits
// for them any more (endTaskTurn, which may give the child's claim to a
// prompt a client sent it). A child that holds a claim has its task turn
// stopped after the commit (interruptChildren) or ended by the sweep.
func (t *txw) endForegroundJobs(parentID string, end turnEnd) error {
	rows, err := t.Query(`SELECT j.child_id, j.call_id, COALESCE(p.id, ''), EXISTS (SELECT 1 FROM claims c WHERE c.session_id = j.child_id)
		FROM jobs j LEFT JOIN prompts p ON p.session_id = j.child_id AND p.client_id = 'task-' || j.call_id AND p.state = ?
		WHERE j.parent_id = ? AND j.state = ?
		AND j.background = 0`,
		string(PromptRunning), parentID, string(JobRunning))
	if err != nil {
		return fmt.Errorf("end foreground jobs: %w", err)
	}
	type fg struct {
		job      event.Job
		promptID string
		claimed  bool
	}
	var jobs []fg
	for rows.Next() {
		var j fg
		if err := rows.Scan(&j.job.ChildID, &j.job.CallID, &j.promptID, &j.claimed); err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	reason := event.ReasonOrphaned
	if end.typ == event.ExecutionInterrupted {
		reason = event.ReasonUser
	}
	for _, j := range jobs {
		if _, err := t.append(parentID, event.JobEnded, j.job); err != nil {
			return err
		}
		if j.promptID != "" && !j.claimed {
			end := interruption("", j.promptID, reason, event.CutInterrupted, nil)
			if _, err := t.endTaskTurn(j.job.ChildID, end, reason, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// endTaskTurn ends a child's task turn that no call waits for any more,
// with end, its terminal (none if end.promptID is empty: the turn had not
// started): the job ended with its parent's turn (end is an interruption),
// or no live job names the turn after a kill (end fails it, aborted). The
// turn's pending blockers and the child's queued task prompts are
// cancelled with reason. Prompts a client sent the child are its own, no
// parent's: they keep their places, and the claim goes on to the oldest of
// them, taken if the child held none (it was parked: the caller's write
// armed a wake-up, or holds a claim of the tree's) and started here if
// startNext; with none queued the claim is released.
func (t *txw) endTaskTurn(sessionID string, end turnEnd, reason string, startNext bool) (*plan, error) {
	if err := t.endRunning(sessionID, end); err != nil {
		return nil, err
	}
	rows, err := t.Query(`SELECT p.id FROM prompts p JOIN jobs j ON j.child_id = p.session_id AND p.client_id = 'task-' || j.call_id
		WHERE p.session_id = ? AND p.state = ? ORDER BY p.admitted_seq`, sessionID, string(PromptQueued))
	if err != nil {
		return nil, fmt.Errorf("cancel queued task prompts: %w", err)
	}
	if err := t.cancelPrompts(sessionID, rows, reason); err != nil {
		return nil, err
	}
	if startNext {
		return t.beginExecution(sessionID, event.CausePrompt)
	}
	// A parked child held no claim.
	return nil, t.claimForQueue(sessionID, false)
}

// endedJobReason reports whether the session's turn promptID is a child's
// task turn whose job has ended, and the reason its end gives the turn:
// event.ReasonUser when its parent's turn was interrupted, as
// endForegroundJobs gives it, else event.ReasonOrphaned. A job ends before
// its child's turn only with the parent's turn (a foreground job): nothing
// waits for the child any more.
func (t *txw) endedJobReason(sessionID, promptID string) (string, bool, error) {
	var state, parentState string
	found, err := storage.QueryRow(t, `SELECT j.state, COALESCE(pp.state, '')
		FROM jobs j JOIN prompts p ON p.session_id = j.child_id AND p.client_id = 'task-' || j.call_id
		LEFT JOIN tool_calls c ON c.id = j.call_id
		LEFT JOIN steps s ON s.id = c.step_id
		LEFT JOIN prompts pp ON pp.id = s.prompt_id
		WHERE j.child_id = ? AND p.id = ?`, []any{sessionID, promptID}, &state, &parentState)
	if err != nil {
		return "", false, fmt.Errorf("read job of %s: %w", sessionID, err)
	}
	if !found || JobState(state) != JobEnded {
		return "", false, nil
	}
	if PromptState(parentState) == PromptInterrupted {
		return event.ReasonUser, true, nil
	}
	return event.ReasonOrphaned, true, nil
}

// taskEndReason is the reason a task turn stopped because its job ended
// (interruptTask) ends with: event.ReasonUser when its parent's turn was
// interrupted, event.ReasonOrphaned when it ended otherwise (endedJobReason).
func (t *txw) taskEndReason(sessionID, promptID string) (string, error) {
	reason, ended, err := t.endedJobReason(sessionID, promptID)
	if err != nil || !ended {
		return event.ReasonUser, err
	}
	return reason, nil
}

// admitNotice admits a notice prompt to a session's queue unless one with
// the same client id is there already, taking the session's claim unless
// its turn is parked.
func (t *txw) admitNotice(sessionID, clientID, text string) error {
	in := PromptInput{ClientID: clientID, Text: text, Mode: event.ModeQueue}
	hash := bodyHash(in)
	var a Admission
	found, err := t.admissionByClient(sessionID, clientID, hash, &a)
	if err != nil || found {
		return err
	}
	if _, err := t.append(sessionID, event.PromptAdmitted, event.Admitted{PromptID: t.id(), ClientID: clientID, Text: text, Mode: in.Mode, BodyHash: hash}); err != nil {
		return err
	}
	// A parked turn is not promoted past its blockers, as in Admit: the
	// notice waits in the queue, unclaimed, until that turn ends.
	waiting, err := t.parked(sessionID)
	if err != nil || waiting {
		return err
	}
	_, err = t.claims().take(sessionID, t.now())
	return err
}

// afterChildTurn starts the parent here once a child's turn ended, if the
// parent has a claim with no execution and none runs here: a notice was
// just admitted (its turn starts), or the parent's waiting call was
// resolved (its turn continues, cause resolution). The caller holds claimMu.
func (inst *Instance) afterChildTurn(ctx context.Context, childID string) {
	if !strings.Contains(childID, ".") {
		return // a root: child ids are {root}.{n}
	}
	var parentID string
	if err := inst.host.DB.Tx(ctx, func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT COALESCE(parent_id, '') FROM sessions WHERE id = ?`, []any{childID}, &parentID)
		return err
	}); err != nil || parentID == "" {
		return // the wake-up starts it
	}
	inst.startLocked(ctx, parentID, event.CauseResolution)
}

// interruptChildren, after its parent's interrupt (or failed turn)
// committed, stops the task turns of the session's descendants that still
// hold a claim for them (their foreground jobs ended with the parent's
// turn), and starts the turn of a descendant whose parked task turn that
// commit ended and that holds a claim for a prompt a client sent it
// (endTaskTurn). Descendants, not only children: a parked child's task
// turn ends inside the parent's commit (endForegroundJobs), and with it
// the job of a grandchild still at work, whose turn must stop too; the
// walk goes down through ended jobs only, so a descendant whose own parent
// still waits for it is left to that parent.
// A kill before this leaves all of it to the sweep: it ends the task turns
// (orphanTurn) and starts the rest. A descendant running a turn of its own
// is left alone: that turn is no parent's.
func (inst *Instance) interruptChildren(ctx context.Context, parentID string) {
	type child struct {
		id   string
		task string // its task prompt, if running or queued
	}
	var children []child
	// Retried: a storage blip here would leave a descendant at work after
	// its ancestor's interrupt answered, and nothing else stops an
	// execution running here.
	err := inst.read(ctx, func(tx storage.Tx) error {
		children = children[:0]
		// Upwards from each claim, through ended jobs, to parentID: the
		// claims are few, while a long-lived tree's ended jobs are many
		// (and a Durable Object pays for every row read), and an
		// interrupt with nothing to stop runs this too.
		rows, err := tx.Query(`WITH RECURSIVE up(id, above, depth) AS (
				SELECT c.session_id, j.parent_id, 1 FROM claims c CROSS JOIN jobs j ON j.child_id = c.session_id WHERE j.state = ?2
				UNION
				SELECT u.id, j.parent_id, u.depth + 1 FROM up u JOIN jobs j ON j.child_id = u.above WHERE j.state = ?2)
			SELECT j.child_id, COALESCE((SELECT p.id FROM prompts p
				WHERE p.session_id = j.child_id AND p.client_id = 'task-' || j.call_id AND p.state IN (?3, ?4)), '')
			FROM up u JOIN jobs j ON j.child_id = u.id
			WHERE u.above = ?1
			ORDER BY u.depth, j.child_id`, parentID, string(JobEnded), string(PromptRunning), string(PromptQueued))
		if err != nil {
			return err
		}
		for rows.Next() {
			var c child
			if err := rows.Scan(&c.id, &c.task); err != nil {
				return err
			}
			children = append(children, c)
		}
		return nil
	})
	if err != nil {
		inst.log.Warn("list children to interrupt; the sweep releases them", "session", parentID, "err", err)
		return
	}
	for _, c := range children {
		if c.task == "" {
			inst.claimMu.Lock()
			inst.startLocked(ctx, c.id, event.CausePrompt) // nothing if it runs already
			inst.claimMu.Unlock()
			continue
		}
		if _, err := inst.interruptTask(ctx, c.id, c.task); err != nil {
			inst.log.Warn("interrupt child; the sweep releases it", "session", parentID, "child", c.id, "err", err)
		}
	}
}

// ChildInfo is a child of a session, for its snapshot.
type ChildInfo struct {
	ID         string
	CallID     string
	Background bool
	Job        JobState // running while its parent's call (or notice) waits for it
	Status     string   // busy, waiting or idle, as sessionStatus derives it
	Turns      int
}

// readChildren lists a session's children in creation order. Children
// created in the same millisecond are ordered by their number: a child's id
// is {root}.{n}, n counting the tree's children up (createChild), so the
// shorter id is the older, and "root.10" comes after "root.9".
func readChildren(tx storage.Tx, parentID string) ([]ChildInfo, error) {
	rows, err := tx.Query(`SELECT j.child_id, j.call_id, j.background,
		j.state, EXISTS (SELECT 1 FROM claims c WHERE c.session_id = j.child_id),
		EXISTS (SELECT 1 FROM blockers b WHERE b.session_id = j.child_id AND b.state = 'pending'), s.turns
		FROM jobs j JOIN sessions s ON s.id = j.child_id WHERE j.parent_id = ? ORDER BY s.created_at, length(j.child_id), j.child_id`, parentID)
	if err != nil {
		return nil, fmt.Errorf("read children: %w", err)
	}
	var out []ChildInfo
	for rows.Next() {
		var c ChildInfo
		var state string
		var claimed, blocked bool
		if err := rows.Scan(&c.ID, &c.CallID, &c.Background, &state, &claimed, &blocked, &c.Turns); err != nil {
			return nil, err
		}
		c.Job, c.Status = JobState(state), sessionStatus(claimed, blocked)
		out = append(out, c)
	}
	return out, nil
}

// turnEndState is the state a finishing execution's record gives its
// prompt, or "" when the record does not end the turn (a shutdown, a
// scheduled retry).
func turnEndState(cause error, out Outcome, storageEnd bool) PromptState {
	switch {
	case errors.Is(cause, ErrShutdown):
		return ""
	case errors.Is(cause, ErrInterrupted) || errors.Is(cause, ErrSuperseded):
		return PromptInterrupted
	case storageEnd || out.Kind == Failed:
		return PromptFailed
	case cause == nil && out.Kind == Succeeded:
		return PromptSucceeded
	}
	return ""
}
