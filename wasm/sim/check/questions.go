package check

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/core/event"
)

// The rules of durable questions (DESIGN §9, §14): a question is resolved
// at most once, only by a client's reply or the user's interrupt (never by
// a kill, a shutdown or an eviction), stays listed and answerable until
// then, and its turn continues only from a committed resolution, once.
const (
	RuleQuestionOnce     Rule = "question-resolved-once"
	RuleQuestionByClient Rule = "question-resolved-by-client"
	RuleQuestionListed   Rule = "question-listed-until-resolved"
	RuleContinuation     Rule = "continuation-after-resolution"
	// RuleApproval: a call that asked for permission becomes executing (and
	// so reaches its receiver) only after an approval of it committed; one
	// rejected without a message, which ends the turn, is settled declined
	// by that reply, not left without a result.
	RuleApproval Rule = "body-after-approval"
)

// Listing is a list of pending questions the API answered 200. Sent and
// Answered are the tree's commit positions (highest events.gseq) when the
// request was last sent and when its answer ended (0: not known).
type Listing struct {
	// Kind is the list's: "" for GET …/questions, "permission" for GET
	// …/permissions (its ids start "p-").
	Kind     string   `json:"kind,omitempty"`
	Session  string   `json:"session"`
	At       int64    `json:"at"`
	Sent     int64    `json:"sent"`
	Answered int64    `json:"answered"`
	IDs      []string `json:"ids"`
}

// Reply is a reply to a question a client sent.
type Reply struct {
	Session    string `json:"session"`
	Question   string `json:"question"`
	ResponseID string `json:"response_id"`
	Cancel     bool   `json:"cancel,omitempty"`
	At         int64  `json:"at"`
	// Status is the answer's (0: never answered, the instance died).
	Status int `json:"status"`
	// Winner is the response_id a 409 named as the winner ("" for an
	// interrupt's cancellation).
	Winner string `json:"winner,omitempty"`
	// Body is the request's body: the same response_id with another body
	// is a different reply.
	Body     string `json:"body,omitempty"`
	Sent     int64  `json:"sent"`
	Answered int64  `json:"answered"`
}

// question is what the log says about one question.
type question struct {
	id, session, prompt, step string
	call                      string
	// action and resources are what a permission request asks about
	// (always.go).
	action    string
	resources []string
	final     []string // the resources a final server rule asks about (final.go)
	asked     *rec     // the session.step.parked@1 that asked it
	resolved  *rec     // its first resolution
	park      *park
}

// park is one session.step.parked@1: its questions and the execution that
// continued the turn from their resolution.
type park struct {
	e         *rec
	ids       []string // its questions
	tasks     []string // its task blockers (tasks.go)
	continued *rec
	broken    bool // a violation of whileParked was reported: one per park
}

// answeredSettlement reports whether e settles a call that asked a
// question, from its committed answers: progress, as core counts it (the
// person's answer will not be asked again), though no tool body ran.
//
// A call that asked for permission is different: an approved one runs its
// body, whose settlement is progress as any body's (by Ran), while one
// settled without running after its executing record died (outcome
// unknown) is not; only a rejected one, settled declined from the reply,
// is the person's answer.
func (ck *checker) answeredSettlement(e *rec) bool {
	if e.Type != event.ToolSettled || !ck.asking[e.p.CallID] {
		return false
	}
	if ck.permCalls[e.p.CallID] != nil {
		return e.p.Outcome == event.OutcomeDeclined
	}
	return true
}

// resolution reports whether e resolves a question or a permission
// request (the rules of questions apply to both kinds of blocker).
func resolution(e *rec) bool {
	switch e.Type {
	case event.QuestionAnswered, event.QuestionCancelled, event.PermissionApproved, event.PermissionRejected, event.PermissionCancelled:
		return true
	}
	return false
}

// proceeds reports whether a resolution lets its call continue (an answer,
// an approval, a reject with a message) rather than ending the turn.
func proceeds(r *rec) bool {
	return r != nil && (r.Type == event.QuestionAnswered || r.Type == event.PermissionApproved || r.Type == event.PermissionRejected)
}

// endsByReply reports whether a resolution is a client's reply that ends
// the turn and cancels its siblings: a cancelled question, a permission
// request rejected without a message (a reject with one is feedback for
// the model: the call is declined and the turn goes on).
func endsByReply(r *rec) bool {
	if r == nil {
		return false
	}
	switch r.Type {
	case event.QuestionCancelled:
		return r.p.Reason == event.CancelReply
	case event.PermissionRejected:
		return replyMessage(r) == ""
	}
	return false
}

// kindOf is a blocker id's listing kind.
func kindOf(id string) string {
	if strings.HasPrefix(id, "p-") {
		return "permission"
	}
	return ""
}

// approvals judges the calls that asked for permission: each executing
// record follows a committed approval of one of the call's requests.
func (ck *checker) approvals() {
	for _, callID := range slices.Sorted(maps.Keys(ck.permCalls)) {
		c := ck.calls[callID]
		if c == nil || c.executing == nil {
			continue
		}
		ok := false
		for _, id := range ck.permCalls[callID] {
			if r := ck.questions[id].resolved; r != nil && r.Type == event.PermissionApproved && r.gseq > 0 && r.gseq < c.executing.gseq {
				ok = true
			}
		}
		if !ok {
			ck.fail(c.session, c.executing, RuleApproval, "call %s is executing without a committed approval of its permission request", callID)
		}
	}
}

// parked records the questions of a park; each id is asked once.
func (ck *checker) parked(sid string, e *rec, tr *turn) {
	if tr.parked != nil && tr.parked.continued == nil {
		ck.fail(sid, e, RuleContinuation, "the turn of %s parks again before it continued from its park #%d", tr.id, tr.parked.e.Seq)
	}
	p := &park{e: e}
	for _, b := range e.p.Blockers {
		if b.Kind == event.KindTask {
			if w := ck.sub.waits[b.ID]; w != nil {
				ck.fail(sid, e, RuleTaskResult, "task blocker %s is parked on again (first #%d)", b.ID, w.park.e.Seq)
				continue
			}
			ck.sub.waits[b.ID] = &taskWait{id: b.ID, session: sid, call: b.CallID, prompt: tr.id, park: p}
			ck.asking[b.CallID] = true // its settlement from the child's end is progress, as an answer's is
			p.tasks = append(p.tasks, b.ID)
			continue
		}
		if q := ck.questions[b.ID]; q != nil {
			ck.fail(sid, e, RuleQuestionOnce, "question %s is asked again (first #%d)", b.ID, q.asked.Seq)
			continue
		}
		q := &question{id: b.ID, session: sid, prompt: tr.id, step: e.p.StepID, call: b.CallID, asked: e, park: p}
		ck.questions[b.ID] = q
		ck.asking[b.CallID] = true
		if kindOf(b.ID) == "permission" {
			ck.permCalls[b.CallID] = append(ck.permCalls[b.CallID], b.ID)
			var req struct {
				Action    string   `json:"action"`
				Resources []string `json:"resources"`
				Final     []string `json:"final"`
			}
			if err := json.Unmarshal(b.Request, &req); err != nil {
				ck.fail(sid, e, RuleProjections, "permission request %s does not decode: %v", b.ID, err)
			}
			q.action, q.resources, q.final = req.Action, req.Resources, req.Final
		}
		p.ids = append(p.ids, b.ID)
		ck.res.Questions++
		if ck.sub.parents[sid] != "" {
			ck.res.ChildQuestions++
		}
	}
	tr.parked, tr.resumes = p, 0 // a parked turn consumes no budget (§6.3)
}

// resolve records a question's resolution: the first one only, and by a
// client's reply or the user's interrupt only.
func (ck *checker) resolve(sid string, e *rec, l *Ledger) {
	switch e.Type {
	case event.QuestionAnswered, event.PermissionApproved:
		ck.res.Answered++
	default:
		ck.res.Cancelled++
	}
	q := ck.questions[e.p.BlockerID]
	switch {
	case q == nil:
		ck.fail(sid, e, RuleQuestionOnce, "question %s is resolved but was never asked", e.p.BlockerID)
		return
	case q.resolved != nil:
		ck.fail(sid, e, RuleQuestionOnce, "question %s is resolved again (first #%d %s)", q.id, q.resolved.Seq, q.resolved.Type)
		return
	}
	q.resolved = e
	if (e.Type == event.QuestionAnswered || e.Type == event.PermissionApproved) && ck.sub.parents[sid] != "" {
		ck.res.ChildAnswered++
	}
	if e.p.Reason == event.CancelInterrupt || e.p.Reason == event.CancelSibling {
		return // judged with the turn's end (endedParked)
	}
	if e.Type == event.PermissionApproved && e.p.Reason == event.ApprovedAlways && e.p.ResponseID == "" {
		return // approved by another request's always reply, in its transaction
	}
	cancel := e.Type == event.QuestionCancelled || e.Type == event.PermissionRejected
	if e.Type == event.PermissionCancelled || (e.Type == event.QuestionCancelled && e.p.Reason != event.CancelReply) {
		ck.fail(sid, e, RuleQuestionByClient, "question %s is cancelled for %q: only a reply, a sibling's cancel or the user's interrupt cancels one", q.id, e.p.Reason)
		return
	}
	if e.p.ResponseID == "" {
		ck.fail(sid, e, RuleQuestionByClient, "question %s is resolved without a response_id: no client replied", q.id)
		return
	}
	for _, r := range l.Replies {
		if r.Question == q.id && r.ResponseID == e.p.ResponseID && r.Cancel == cancel {
			return
		}
	}
	ck.fail(sid, e, RuleQuestionByClient, "question %s is resolved (%s) by response %s, which no client sent", q.id, e.Type, e.p.ResponseID)
}

// whileParked judges an event of a parked turn that has not continued:
// only its questions' resolutions and its end may come. prev is the event
// before e in the session's log (nil for the first): a start right after a
// notice's admission is named so, its likely cause.
func (ck *checker) whileParked(sid string, e, prev *rec, tr *turn) {
	p := tr.parked
	if p == nil || p.continued != nil || resolution(e) || taskResolution(e) {
		return
	}
	if e.Type == event.ToolSettled && e.p.Outcome == event.OutcomeDeclined && ck.permCalls[e.p.CallID] != nil {
		return // a plain reject settles its call declined in the reply's transaction
	}
	// One report per park, but one per execution started too soon; the
	// rightful continuation is still recognised after them, so the budget
	// rule does not report that one again.
	fail := func(format string, args ...any) {
		if !p.broken || e.Type == event.ExecutionStarted {
			ck.fail(sid, e, RuleContinuation, format, args...)
		}
		p.broken = true
	}
	switch e.Type {
	case event.ExecutionStarted:
		after := ""
		if prev != nil && prev.Type == event.PromptAdmitted && strings.HasPrefix(prev.p.ClientID, noticeClient) {
			after = fmt.Sprintf(", right after notice %s was admitted (#%d)", prev.p.ClientID, prev.Seq)
		}
		if e.p.Cause != event.CauseResolution {
			fail("the parked turn of %s starts an execution (cause %q) without the resolution of its questions%s", tr.id, e.p.Cause, after)
			return
		}
		for _, id := range p.ids {
			q := ck.questions[id]
			if !proceeds(q.resolved) {
				fail("the parked turn of %s continues while question %s is not answered%s", tr.id, id, after)
				return
			}
		}
		for _, id := range p.tasks {
			if w := ck.sub.waits[id]; w.resolved == nil || w.resolved.Type != event.TaskResolved {
				fail("the parked turn of %s continues while its sub-agent (task blocker %s) has not ended%s", tr.id, id, after)
				return
			}
		}
		p.continued = e
	case event.ExecutionInterrupted, event.ExecutionFailed:
		if e.Type == event.ExecutionInterrupted && (e.p.Reason == event.ReasonUser || e.p.Reason == event.ReasonSuperseded) {
			return
		}
		if e.Type == event.ExecutionInterrupted && e.p.Reason == event.ReasonOrphaned && ck.sub.parents[tr.admitted.SessionID] != "" {
			return // a sub-agent's task turn whose parent's turn ended without it
		}
		if e.Type == event.ExecutionFailed && e.p.Kind == event.FailAborted {
			return // a claim older than the configured maximum age
		}
		fail("the parked turn of %s ends %s: a kill, shutdown or eviction must leave it waiting", tr.id, endName(*e))
	default:
		fail("%s is written for the parked turn of %s before any continuation", e.Type, tr.id)
	}
}

// endedParked judges the questions of a turn that ended: one cancelled by
// an interrupt or as a sibling belongs to a turn the user ended, and an
// answered park continued.
func (ck *checker) endedParked(sid string, tr *turn) {
	// A sub-agent's task turn ended orphaned (its parent's turn ended
	// without it) cancels its blockers as an interrupt does.
	userEnd := stoppedForGood(tr.end) && (tr.end.p.Reason != event.ReasonOrphaned || ck.sub.parents[sid] != "")
	for _, q := range ck.questionsOf(tr.id) {
		r := q.resolved
		if r == nil {
			if tr.end != nil {
				ck.fail(sid, tr.end, RuleQuestionOnce, "question %s is still pending after its turn ended %s", q.id, endName(*tr.end))
			}
			continue
		}
		switch r.p.Reason {
		case event.CancelInterrupt:
			switch {
			case !userEnd:
				ck.fail(sid, r, RuleQuestionByClient, "question %s is cancelled by an interrupt, but its turn did not end by the user's interrupt", q.id)
			case ck.cancelledByReply(q.park):
				// The reply's own transaction cancels the rest of its
				// step as siblings: no interrupt finds one still pending.
				ck.fail(sid, r, RuleQuestionByClient, "question %s is cancelled by an interrupt, but a reply that cancelled a question of its step ended the turn", q.id)
			}
		case event.CancelSibling:
			if !userEnd || !ck.cancelledByReply(q.park) {
				ck.fail(sid, r, RuleQuestionByClient, "question %s is cancelled as a sibling, but no reply cancelled a question of its step", q.id)
			}
		}
		if r.Type == event.PermissionRejected && endsByReply(r) {
			if c := ck.calls[q.call]; c == nil || c.settled == nil || c.settled.p.Outcome != event.OutcomeDeclined {
				ck.fail(sid, r, RuleApproval, "permission request %s is rejected without a message, which ends the turn, but its call %s is not settled declined", q.id, q.call)
			}
		}
	}
	if p := tr.parked; p != nil && p.continued == nil && tr.end == nil {
		for _, id := range p.ids {
			if q := ck.questions[id]; !proceeds(q.resolved) {
				return // visibly waiting
			}
		}
		for _, id := range p.tasks {
			if w := ck.sub.waits[id]; w.resolved == nil || w.resolved.Type != event.TaskResolved {
				return // waiting for its sub-agent (judged in tasks.go)
			}
		}
		ck.eventually(sid, p.e, RuleContinuation, "every blocker of the park of %s is resolved, but the turn never continued", tr.id)
	}
}

func (ck *checker) cancelledByReply(p *park) bool {
	for _, id := range p.ids {
		if endsByReply(ck.questions[id].resolved) {
			return true
		}
	}
	return false
}

// questionsOf lists a turn's questions, in id order.
func (ck *checker) questionsOf(prompt string) []*question {
	var out []*question
	for _, id := range slices.Sorted(maps.Keys(ck.questions)) {
		if q := ck.questions[id]; q.prompt == prompt {
			out = append(out, q)
		}
	}
	return out
}

// waiting reports whether tr is visibly waiting: parked, not continued,
// with a question pending, or a sub-agent whose turn visibly waits.
func (ck *checker) waiting(tr *turn) bool {
	if tr.parked == nil || tr.parked.continued != nil || tr.end != nil {
		return false
	}
	for _, id := range tr.parked.ids {
		if ck.questions[id].resolved == nil {
			return true
		}
	}
	for _, id := range tr.parked.tasks {
		w := ck.sub.waits[id]
		if w.resolved != nil {
			continue
		}
		if j := ck.sub.byCall[w.call]; j != nil {
			if child := ck.taskTurn(j); child != nil && child != tr && ck.waiting(child) {
				return true
			}
		}
	}
	return false
}

// waitingOnChild reports whether tr waits, visibly, only through a
// sub-agent: parked on a task blocker whose child's turn waits for an
// answer, with none of its own questions pending.
func (ck *checker) waitingOnChild(tr *turn) bool {
	if !ck.waiting(tr) {
		return false
	}
	for _, id := range tr.parked.ids {
		if ck.questions[id].resolved == nil {
			return false
		}
	}
	return true
}

// replies judges what the API answered: a listing shows exactly the
// questions asked and not resolved around it; a reply is answered 200 only
// as the winner (or its repeat), 409 only with the winner named, 404 only
// for a question not yet asked when it was sent.
func (ck *checker) replies(l *Ledger) {
	for _, ls := range l.Listings {
		if ls.Sent == 0 || ls.Answered == 0 {
			continue
		}
		listed := map[string]bool{}
		for _, id := range ls.IDs {
			listed[id] = true
			q := ck.questions[id]
			switch {
			case q == nil || !committedBy(q.asked, ls.Answered):
				ck.fail(ls.Session, nil, RuleQuestionListed, "question %s is listed at %d (commit position %d) but was not asked by then", id, ls.At, ls.Answered)
			case q.resolved != nil && committedBy(q.resolved, ls.Sent):
				ck.fail(ls.Session, q.resolved, RuleQuestionListed, "question %s is listed at %d (commit position %d) after it was resolved", id, ls.At, ls.Sent)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ck.questions)) {
			q := ck.questions[id]
			if kindOf(id) != ls.Kind || listed[id] || !committedBy(q.asked, ls.Sent) || (q.resolved != nil && committedBy(q.resolved, ls.Answered)) {
				continue
			}
			if q.session != ls.Session && ck.root(q.session) != ls.Session {
				continue
			}
			ck.fail(q.session, q.asked, RuleQuestionListed, "question %s, asked and not resolved, is missing from the listing at %d (commit positions %d…%d)", id, ls.At, ls.Sent, ls.Answered)
		}
	}
	for _, r := range l.Replies {
		if r.Status == 0 || r.Status >= 500 {
			continue
		}
		q := ck.questions[r.Question]
		var won *rec
		if q != nil {
			won = q.resolved
		}
		switch {
		case r.Status == 404:
			if q != nil && committedBy(q.asked, r.Sent) {
				ck.fail(q.session, q.asked, RuleQuestionListed, "reply %s to question %s, asked before it was sent, is answered 404", r.ResponseID, q.id)
			}
		case r.Status == 200:
			if won == nil || won.p.ResponseID != r.ResponseID {
				ck.fail(r.Session, won, RuleQuestionOnce, "reply %s to question %s is answered 200, but %s", r.ResponseID, r.Question, winnerOf(won))
			} else if r.Answered > 0 && !committedBy(won, r.Answered) {
				ck.fail(r.Session, won, RuleQuestionOnce, "reply %s to question %s is answered 200 before its resolution committed", r.ResponseID, r.Question)
			}
		case r.Status == 409:
			switch {
			case won == nil:
				ck.fail(r.Session, nil, RuleQuestionOnce, "reply %s to question %s is answered 409, but the question was never resolved", r.ResponseID, r.Question)
			case won.p.ResponseID != r.Winner:
				ck.fail(r.Session, won, RuleQuestionOnce, "reply %s to question %s is answered 409 naming winner %q, but %s", r.ResponseID, r.Question, r.Winner, winnerOf(won))
			case won.p.ResponseID == r.ResponseID && sameReplies(l, r):
				ck.fail(r.Session, won, RuleQuestionOnce, "reply %s to question %s is refused 409 although it is the winner, sent again with the same body", r.ResponseID, r.Question)
			}
		}
	}
}

// oneBodyPerResponse: a response_id names one reply. The same id with
// another body is a different reply, refused 409 once the first won, so
// replies to a question answered 200 under one id all carry one body.
func (ck *checker) oneBodyPerResponse(l *Ledger) {
	first := map[[2]string]string{} // question and response_id → the body answered 200
	for _, r := range l.Replies {
		if r.Status != 200 {
			continue
		}
		k := [2]string{r.Question, r.ResponseID}
		body, seen := first[k]
		switch {
		case !seen:
			first[k] = r.Body
		case body != r.Body:
			ck.fail(r.Session, ck.resolutionOf(r.Question), RuleQuestionOnce, "reply %s to question %s is answered 200 with two different bodies (%s, then %s): the second is another reply and must be refused",
				r.ResponseID, r.Question, body, r.Body)
		}
	}
}

// resolutionOf is a question's first resolution (nil if none or unknown).
func (ck *checker) resolutionOf(id string) *rec {
	if q := ck.questions[id]; q != nil {
		return q.resolved
	}
	return nil
}

// sameReplies reports whether every reply with r's response_id to r's
// question had the same body.
func sameReplies(l *Ledger, r Reply) bool {
	for _, o := range l.Replies {
		if o.Question == r.Question && o.ResponseID == r.ResponseID && o.Body != r.Body {
			return false
		}
	}
	return true
}

func winnerOf(won *rec) string {
	switch {
	case won == nil:
		return "the question was never resolved"
	case won.p.ResponseID == "":
		return "it was resolved by " + string(won.Type) + " (" + won.p.Reason + ")"
	}
	return "it was resolved by response " + won.p.ResponseID
}

// root is a session's root (the session itself for a root or an unknown one).
func (ck *checker) root(sid string) string {
	if r := ck.roots[sid]; r != "" {
		return r
	}
	return sid
}
