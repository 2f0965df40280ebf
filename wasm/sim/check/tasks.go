package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/core/event"
)

// The rules of sub-agents (DESIGN §10, §14). A task call records a job in
// its parent's log and creates its child {root}.{n} with one task prompt
// (client id task-<call>); a foreground call parks on a task blocker that
// the child's turn end resolves; a background child's end admits a notice
// prompt (client id notice-<child>-<turn>) to its parent.
const (
	// RuleChildOnce: a task call has at most one child (a re-run call
	// re-attaches), a child belongs to one call of its parent, and it runs
	// at most one turn per task call.
	RuleChildOnce Rule = "child-runs-once-per-call"
	// RuleNoticeOnce: a background child's completion notice is admitted
	// to its parent exactly once, after the child's turn ended.
	RuleNoticeOnce Rule = "background-notice-once"
	// RuleJobSettled: every job ends once, and at quiescence every job
	// has ended (unless its child visibly waits for an answer).
	RuleJobSettled Rule = "job-settled"
	// RuleOrphanChild: no child claim is left at quiescence without a live
	// job naming it, no child is resumed after its job ended, and none is
	// abandoned (failed aborted, not by the budget) while its job runs or
	// its parent's call waits for it.
	RuleOrphanChild Rule = "no-orphan-child"
	// RuleTaskResult: a parent's task call gets exactly one result: its
	// task blocker is resolved at most once, by its child's turn end (or,
	// for a child that ended before the parent's step parked, by that
	// park's commit), and a foreground call settled ok carries its
	// child's final answer.
	RuleTaskResult Rule = "task-call-one-result"
	// RuleTaskEndReason: a child's task turn interrupted gives the reason
	// of what stopped it (docs/api.md, session.execution.interrupted@1):
	// user for its parent's turn interrupted (or superseded), for an
	// interrupt sent to the child itself, or for the child's own reply
	// that ended it; orphaned only for a foreground job ended with a
	// parent's turn that ended otherwise (failed or succeeded).
	RuleTaskEndReason Rule = "task-end-reason"
)

// Client id prefixes of the prompts sub-agents admit (core.TaskClientID,
// core.NoticeClientID).
const (
	taskClient   = "task-"
	noticeClient = "notice-"
)

// job is what the log says about one task call's child.
type job struct {
	parent, child, call string
	background          bool
	started             *rec
	ended               *rec
}

// taskWait is a foreground call's task blocker.
type taskWait struct {
	id, session, call, prompt string
	park                      *park
	resolved                  *rec // its first resolution (task.resolved or task.cancelled)
}

// subagents is the checker's record of a tree's sub-agents.
type subagents struct {
	jobs     map[string]*job      // child → its job
	byCall   map[string]*job      // call → its job
	waits    map[string]*taskWait // task blocker id → wait
	parents  map[string]string    // child → parent (session.created)
	tasks    map[string][]*rec    // child → its task prompts' admissions
	notices  []*rec               // notice prompts' admissions, in log order
	resumed  map[string][]*rec    // child → its execution.resumed records, and its executions continuing from a resolution
	childIDs []string             // children in the order their creation was met
}

func newSubagents() subagents {
	return subagents{jobs: map[string]*job{}, byCall: map[string]*job{}, waits: map[string]*taskWait{},
		parents: map[string]string{}, tasks: map[string][]*rec{}, resumed: map[string][]*rec{}}
}

// taskEvent reports whether e is a sub-agent record of a session's log
// that belongs to no turn: a job's start and end (a background job ends
// after its parent's turn did; a foreground one in the parent's terminal
// transaction). It records it.
func (ck *checker) taskEvent(sid string, e *rec) bool {
	switch e.Type {
	case event.JobStarted:
		if j := ck.sub.byCall[e.p.CallID]; j != nil {
			ck.fail(sid, e, RuleChildOnce, "call %s records a second job (child %s; first child %s at #%d): a re-run call must re-attach", e.p.CallID, e.p.ChildID, j.child, j.started.Seq)
			return true
		}
		if j := ck.sub.jobs[e.p.ChildID]; j != nil {
			ck.fail(sid, e, RuleChildOnce, "child %s is named by call %s and by call %s", e.p.ChildID, j.call, e.p.CallID)
			return true
		}
		j := &job{parent: sid, child: e.p.ChildID, call: e.p.CallID, background: e.p.Background, started: e}
		if j.background {
			ck.res.Background++
		}
		ck.sub.jobs[j.child], ck.sub.byCall[j.call] = j, j
		return true
	case event.JobEnded:
		j := ck.sub.jobs[e.p.ChildID]
		switch {
		case j == nil || j.parent != sid:
			ck.fail(sid, e, RuleJobSettled, "the job of child %s ends, but this session never started it", e.p.ChildID)
		case j.ended != nil:
			ck.fail(sid, e, RuleJobSettled, "the job of child %s ends again (first #%d)", j.child, j.ended.Seq)
		default:
			j.ended = e
		}
		return true
	}
	return false
}

// noteSubagent records what a session's log says about sub-agents and
// belongs to a turn too: a child's creation, task and notice admissions,
// a child's resumes.
func (ck *checker) noteSubagent(sid string, e *rec) {
	switch e.Type {
	case event.SessionCreated:
		if e.p.ParentID != "" {
			ck.sub.parents[sid] = e.p.ParentID
			ck.sub.childIDs = append(ck.sub.childIDs, sid)
		}
	case event.PromptAdmitted:
		switch {
		case strings.HasPrefix(e.p.ClientID, taskClient):
			ck.sub.tasks[sid] = append(ck.sub.tasks[sid], e)
		case strings.HasPrefix(e.p.ClientID, noticeClient):
			ck.sub.notices = append(ck.sub.notices, e)
		}
	case event.ExecutionResumed:
		ck.sub.resumed[sid] = append(ck.sub.resumed[sid], e)
	case event.ExecutionStarted:
		if e.p.Cause == event.CauseResolution {
			ck.sub.resumed[sid] = append(ck.sub.resumed[sid], e)
		}
	}
}

// taskResolution reports whether e resolves a task blocker.
func taskResolution(e *rec) bool {
	return e.Type == event.TaskResolved || e.Type == event.TaskCancelled
}

// resolveTask records a task blocker's resolution: the first one only.
func (ck *checker) resolveTask(sid string, e *rec) {
	w := ck.sub.waits[e.p.BlockerID]
	switch {
	case w == nil:
		ck.fail(sid, e, RuleTaskResult, "task blocker %s is resolved but no step parked on it", e.p.BlockerID)
	case w.resolved != nil:
		ck.fail(sid, e, RuleTaskResult, "task blocker %s is resolved again (first #%d %s): the call gets two results", w.id, w.resolved.Seq, w.resolved.Type)
	default:
		w.resolved = e
	}
}

// subagentRules judges the tree's sub-agents once every log was read.
func (ck *checker) subagentRules() {
	ck.res.Children, ck.res.Notices = len(ck.sub.childIDs), len(ck.sub.notices)
	for _, child := range ck.sub.childIDs {
		ck.child(child)
	}
	for _, id := range slices.Sorted(maps.Keys(ck.sub.jobs)) {
		ck.jobRules(ck.sub.jobs[id])
	}
	for _, id := range slices.Sorted(maps.Keys(ck.sub.waits)) {
		ck.waitRules(ck.sub.waits[id])
	}
	ck.noticeRules()
}

// child: a child belongs to one job of its parent, has one task prompt, for
// that job's call, and runs at most that one turn.
func (ck *checker) child(sid string) {
	j := ck.sub.jobs[sid]
	log := ck.h.logs[sid]
	if j == nil {
		ck.fail(sid, &log[0], RuleChildOnce, "child %s of %s was created, but no job names it", sid, ck.sub.parents[sid])
		return
	}
	if j.parent != ck.sub.parents[sid] {
		ck.fail(sid, &log[0], RuleChildOnce, "child %s was created under %s, but its job is in %s", sid, ck.sub.parents[sid], j.parent)
	}
	if root := ck.root(sid); !strings.HasPrefix(sid, root+".") {
		ck.fail(sid, &log[0], RuleChildOnce, "child id %s is not {root}.{n} of root %s", sid, root)
	}
	tasks := ck.sub.tasks[sid]
	switch {
	case len(tasks) == 0:
		ck.fail(sid, &log[0], RuleChildOnce, "child %s has no task prompt", sid)
	case len(tasks) > 1:
		ck.fail(sid, tasks[1], RuleChildOnce, "child %s is given its task %d times", sid, len(tasks))
	case tasks[0].p.ClientID != taskClient+j.call:
		ck.fail(sid, tasks[0], RuleChildOnce, "child %s's task prompt is %s, but its call is %s", sid, tasks[0].p.ClientID, j.call)
	}
	var turns []string
	for _, pid := range ck.admitted {
		if tr := ck.turns[pid]; tr.admitted.SessionID == sid && tr.started && !ck.ownTurn(tr) {
			turns = append(turns, pid)
		}
	}
	if len(turns) > len(tasks) {
		ck.fail(sid, nil, RuleChildOnce, "child %s runs %d turns for %d task call(s): %v", sid, len(turns), len(tasks), turns)
	}
	// No orphan runs: once its job ended, nothing waits for the child, so
	// the sweep must release it, never resume it, and a reply to its
	// question must not continue it (its park was interrupted with the
	// job's end). A turn of a prompt a client sent the child is the
	// child's own: it resumes and continues like a root's
	// (RuleChildOwnPrompt).
	if j.ended != nil {
		for _, r := range ck.sub.resumed[sid] {
			if tr := ck.turns[r.p.PromptID]; tr != nil && ck.ownTurn(tr) {
				continue
			}
			if r.gseq > j.ended.gseq {
				how := fmt.Sprintf("resumed (attempt %d)", r.p.Attempt)
				if r.Type == event.ExecutionStarted {
					how = "continued from a resolution"
				}
				ck.fail(sid, r, RuleOrphanChild, "child %s is %s after its job ended (%s #%d)", sid, how, j.parent, j.ended.Seq)
				break
			}
		}
	}
	// Nor is one left waiting: a foreground job ends before its child only
	// with its parent's turn, which interrupts the child's parked turn in
	// that transaction, or has the child's claim released by the sweep.
	// A child parked on its question with no job left waits for nobody.
	if tr := ck.taskTurn(j); j.ended != nil && tr != nil && tr.end == nil && !ck.h.claims[sid] {
		how := "is not ended"
		if ck.waiting(tr) {
			how = "waits for an answer"
		}
		ck.eventually(sid, j.ended, RuleOrphanChild, "child %s's task turn %s at quiescence, but its job ended (%s #%d): nothing waits for it", sid, how, j.parent, j.ended.Seq)
	}
	if ck.h.claims[sid] && (j.ended != nil || ck.liveless(j)) {
		ck.eventually(sid, nil, RuleOrphanChild, "child %s is claimed at quiescence, but no live job or waiting call names it", sid)
	}
	ck.orphanedOnlyWhenOrphan(j)
	ck.interruptedForItsCause(j)
}

// interruptedForItsCause: a child's task turn that ends interrupted with
// reason user or orphaned says why (RuleTaskEndReason). The parent's turn
// is the one whose step made the task call; core gives user when that
// turn ended interrupted, whatever its own reason, and orphaned when it
// ended any other way. Interrupts of the child itself are the clients'
// (the ledger's InterruptsSent), and a reply to the child's own question
// that ends its turn interrupts it as the user.
func (ck *checker) interruptedForItsCause(j *job) {
	tr := ck.taskTurn(j)
	if tr == nil || tr.end == nil || tr.end.Type != event.ExecutionInterrupted {
		return
	}
	e := tr.end
	parent := ck.turns[ck.promptOfCall(j.call)]
	parentEnd := "goes on"
	if parent != nil && parent.end != nil {
		parentEnd = "ended " + endName(*parent.end)
	}
	parentInterrupted := !j.background && parent != nil && parent.end != nil && parent.end.Type == event.ExecutionInterrupted
	switch e.p.Reason {
	case event.ReasonOrphaned:
		if j.background {
			ck.fail(j.child, e, RuleTaskEndReason, "child %s's task turn ends interrupted:orphaned, but it is a background child: no parent's turn ends its job", j.child)
		} else if parent == nil || parent.end == nil || parentInterrupted {
			ck.fail(j.child, e, RuleTaskEndReason, "child %s's task turn ends interrupted:orphaned, but its parent's turn %s", j.child, parentEnd)
		}
	case event.ReasonUser:
		if parentInterrupted || ck.interruptedBefore(j.child, tr, e) || ck.endedByOwnReply(tr) {
			return
		}
		ck.fail(j.child, e, RuleTaskEndReason, "child %s's task turn ends interrupted:user, but its parent's turn %s, no interrupt was sent to the child, and no reply of its own ended it",
			j.child, parentEnd)
	}
}

// orphanedOnlyWhenOrphan: a child's task turn that ends failed{aborted}
// other than by a count past the budget was abandoned as an orphan, which
// recovery may do only once nothing waits for it: its job ended, and a
// foreground call's task blocker was resolved or cancelled, in commits
// before the abort. A live job (or waiting call) ends in the abort's own
// transaction, after it: the child was resumable and was given up.
func (ck *checker) orphanedOnlyWhenOrphan(j *job) {
	tr := ck.taskTurn(j)
	if tr == nil || tr.end == nil || tr.end.Type != event.ExecutionFailed || tr.end.p.Kind != event.FailAborted || tr.budgetAbort {
		return
	}
	end := tr.end
	w := ck.sub.waits[blockerOfCall(j.call)]
	switch {
	case j.ended == nil || j.ended.gseq > end.gseq:
		ck.fail(j.child, end, RuleOrphanChild, "child %s's task turn is abandoned (failed{aborted}, no count past the budget: %q) while its job was running", j.child, end.p.Message)
	case w != nil && (w.resolved == nil || w.resolved.gseq > end.gseq):
		ck.fail(j.child, end, RuleOrphanChild, "child %s's task turn is abandoned (failed{aborted}, no count past the budget: %q) while its parent's call %s waited for it", j.child, end.p.Message, j.call)
	}
}

// liveless reports whether no waiting parent call names j's child: the
// call has no pending task blocker.
func (ck *checker) liveless(j *job) bool {
	w := ck.sub.waits[blockerOfCall(j.call)]
	return w == nil || w.resolved != nil
}

// blockerOfCall is the id of a call's task blocker (core.BlockerID("t",
// call, 0)).
func blockerOfCall(call string) string { return "t-" + call + "-0" }

// taskTurn is the child's task turn of job j (nil if never admitted).
func (ck *checker) taskTurn(j *job) *turn {
	for _, a := range ck.sub.tasks[j.child] {
		if a.p.ClientID == taskClient+j.call {
			return ck.turns[a.p.PromptID]
		}
	}
	return nil
}

// jobRules: a job ends once, not before its child's task turn did (a
// background job) or before either that or its parent's turn end (a
// foreground one); at quiescence it has ended unless the child visibly
// waits.
func (ck *checker) jobRules(j *job) {
	child := ck.taskTurn(j)
	if j.ended == nil {
		if child != nil && ck.waiting(child) {
			return
		}
		ck.eventually(j.parent, j.started, RuleJobSettled, "the job of child %s (call %s) is still running at quiescence", j.child, j.call)
		return
	}
	childEnd := child != nil && child.end != nil && child.end.gseq <= j.ended.gseq
	if !childEnd {
		ck.res.Orphaned++
	}
	if j.background {
		if !childEnd {
			ck.fail(j.parent, j.ended, RuleJobSettled, "the background job of child %s ends before its child's turn did", j.child)
		}
		return
	}
	parent := ck.turns[ck.promptOfCall(j.call)]
	parentEnd := parent != nil && parent.end != nil && parent.end.gseq <= j.ended.gseq
	if !childEnd && !parentEnd {
		ck.fail(j.parent, j.ended, RuleJobSettled, "the foreground job of child %s ends while both its child's and its parent's turns go on", j.child)
	}
}

// commitOf is the commit that wrote the event at gseq, as the ledger
// records commits: the events in (from, to]. ok is false when it does
// not know.
func (ck *checker) commitOf(gseq int64) (from, to int64, ok bool) {
	if ck.ledger.Emits == nil || gseq <= 0 {
		return 0, 0, false
	}
	for _, c := range ck.ledger.Emits.Commits {
		if c.From < gseq && gseq <= c.To {
			return c.From, c.To, true
		}
	}
	return 0, 0, false
}

// promptOfCall is the prompt whose step made call ("" if none).
func (ck *checker) promptOfCall(call string) string {
	if c := ck.calls[call]; c != nil {
		return c.prompt
	}
	return ""
}

// waitRules: a task blocker is resolved by its child's turn end (in that
// transaction: never before it), carrying how the turn ended, or cancelled
// by the user's interrupt of its parent; a foreground call gets one
// settlement, the child's final answer when ok.
func (ck *checker) waitRules(w *taskWait) {
	j := ck.sub.byCall[w.call]
	if j == nil {
		ck.fail(w.session, w.park.e, RuleTaskResult, "call %s parks on task blocker %s but has no child", w.call, w.id)
		return
	}
	child := ck.taskTurn(j)
	parent := ck.turns[w.prompt]
	if r := w.resolved; r != nil {
		switch r.Type {
		case event.TaskResolved:
			ck.res.TaskResults++
			if child == nil || child.end == nil || r.gseq < child.end.gseq {
				ck.fail(w.session, r, RuleTaskResult, "task blocker %s is resolved before child %s's turn ended", w.id, j.child)
			}
		case event.TaskCancelled:
			if parent == nil || parent.end == nil || !(parent.end.Type == event.ExecutionInterrupted &&
				(parent.end.p.Reason == event.ReasonUser || parent.end.p.Reason == event.ReasonSuperseded)) {
				ck.fail(w.session, r, RuleTaskResult, "task blocker %s is cancelled (%s), but its parent's turn did not end by the user's interrupt", w.id, r.p.Reason)
			}
		}
	} else if child != nil && child.end != nil && (parent == nil || parent.end == nil) {
		ck.fail(w.session, w.park.e, RuleTaskResult, "child %s's turn ended %s, but the parent's call %s never got its result", j.child, endName(*child.end), w.call)
	}
	// A child whose turn ended before its parent's step parked found no
	// blocker to resolve then: the park resolves it in its own
	// transaction, whatever else the step waits for (resolveEndedTasks).
	// Left to a later boot's sweep, the parent would wait for nothing
	// until one comes. Judged where the ledger knows the commits.
	if child != nil && child.end != nil && child.end.gseq > 0 && child.end.gseq < w.park.e.gseq {
		if from, to, ok := ck.commitOf(w.park.e.gseq); ok && (w.resolved == nil || w.resolved.gseq <= from || w.resolved.gseq > to) {
			ck.fail(w.session, w.park.e, RuleTaskResult, "child %s's turn ended %s (gseq %d) before the park of task blocker %s committed, but that park did not resolve it",
				j.child, endName(*child.end), child.end.gseq, w.id)
		}
	}
	c := ck.calls[w.call]
	if c == nil || c.settled == nil {
		if parent != nil && parent.end != nil && parent.end.Type == event.ExecutionSucceeded {
			ck.fail(w.session, parent.end, RuleTaskResult, "the turn of %s succeeded, but its task call %s never settled", w.prompt, w.call)
		}
		return
	}
	s := c.settled
	if s.p.Outcome != event.OutcomeOK {
		return
	}
	switch {
	case child == nil || child.end == nil || child.end.gseq > s.gseq:
		ck.fail(w.session, s, RuleTaskResult, "task call %s settles ok before child %s's turn ended", w.call, j.child)
	case child.end.Type != event.ExecutionSucceeded:
		ck.fail(w.session, s, RuleTaskResult, "task call %s settles ok, but child %s's turn ended %s", w.call, j.child, endName(*child.end))
	case child.final == nil || s.p.Output != child.final.p.Text:
		ck.fail(w.session, s, RuleTaskResult, "task call %s settles with %q, not child %s's final answer %q", w.call, s.p.Output, j.child, finalText(child))
	}
}

func finalText(tr *turn) string {
	if tr.final == nil {
		return ""
	}
	return tr.final.p.Text
}

// noticeRules: each background child's task turn that ended has exactly
// one notice in its parent's queue, admitted with (never before) that end;
// no other notice is admitted.
func (ck *checker) noticeRules() {
	per := map[string][]*rec{} // child → its notices
	for _, n := range ck.sub.notices {
		child, ok := noticeChild(n.p.ClientID)
		j := ck.sub.jobs[child]
		switch {
		case !ok || j == nil:
			ck.fail(n.SessionID, n, RuleNoticeOnce, "notice %s names no child of the tree", n.p.ClientID)
			continue
		case !j.background:
			ck.fail(n.SessionID, n, RuleNoticeOnce, "notice %s is admitted for foreground child %s", n.p.ClientID, child)
		case n.SessionID != j.parent:
			ck.fail(n.SessionID, n, RuleNoticeOnce, "notice %s is admitted to %s, not to its parent %s", n.p.ClientID, n.SessionID, j.parent)
		}
		per[child] = append(per[child], n)
	}
	for _, id := range slices.Sorted(maps.Keys(ck.sub.jobs)) {
		j := ck.sub.jobs[id]
		if !j.background {
			continue
		}
		ns := per[id]
		child := ck.taskTurn(j)
		ended := child != nil && child.end != nil
		switch {
		case ended && len(ns) == 0:
			ck.fail(j.parent, child.end, RuleNoticeOnce, "background child %s ended %s, but no notice reached its parent", id, endName(*child.end))
		case len(ns) > 1:
			ck.fail(j.parent, ns[1], RuleNoticeOnce, "background child %s's notice is admitted %d times (%s first at #%d)", id, len(ns), ns[0].p.ClientID, ns[0].Seq)
		case len(ns) == 1 && (!ended || ns[0].gseq < child.end.gseq):
			ck.fail(j.parent, ns[0], RuleNoticeOnce, "background child %s's notice is admitted before its turn ended", id)
		}
	}
}

// noticeChild is the child a notice client id names: notice-<child>-<turn>.
func noticeChild(clientID string) (string, bool) {
	rest := strings.TrimPrefix(clientID, noticeClient)
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", false
	}
	return rest[:i], true
}
