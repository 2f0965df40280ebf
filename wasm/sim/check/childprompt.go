package check

import (
	"strings"

	"github.com/revenantrt/revenant/core/event"
)

// RuleChildOwnPrompt: a prompt a client sent to a child session is the
// child's own, which no parent waits for (docs/api.md, Sub-agents;
// docs/RATIONALE.md, "Why is a child's task turn orphaned by a restart,
// but a prompt sent to the child is not?"). It waits in the child's queue
// behind the task turn and then runs a turn of its own, resumed after a
// kill like a root's, on the child's own budget. So its parent's
// interrupt, the end of the child's task turn (for its parent, or as an
// orphan after a kill) and the sweep never end it: it ends interrupted or
// cancelled only by an interrupt sent to the child itself (or a reply that
// cancels its own question or rejects its own call), and failed{aborted}
// only by a count past the budget, never as an orphan.
const RuleChildOwnPrompt Rule = "child-own-prompt-kept"

// ownPrompt reports whether tr is a prompt a client sent to a child: a
// child session's prompt that is neither its task prompt nor a notice.
func (ck *checker) ownPrompt(tr *turn) bool {
	if ck.sub.parents[tr.admitted.SessionID] == "" {
		return false
	}
	id := tr.admitted.p.ClientID
	return !strings.HasPrefix(id, taskClient) && !strings.HasPrefix(id, noticeClient)
}

// childOwnPrompts judges how every prompt a client sent a child ended.
func (ck *checker) childOwnPrompts() {
	for _, pid := range ck.admitted {
		tr := ck.turns[pid]
		if !ck.ownPrompt(tr) {
			continue
		}
		ck.res.ChildPrompts++
		e := tr.end
		if e == nil {
			continue // never ended, or visibly waiting: judged in settle
		}
		sid := tr.admitted.SessionID
		switch {
		case e.Type == event.ExecutionSucceeded:
			ck.res.ChildPromptsOK++
		case e.Type == event.ExecutionFailed && e.p.Kind == event.FailAborted:
			if !tr.budgetAbort {
				ck.fail(sid, e, RuleChildOwnPrompt, "prompt %s (client id %s), which a client sent child %s, ends failed{aborted} without a count past the budget: %q",
					pid, tr.admitted.p.ClientID, sid, e.p.Message)
			}
		case e.Type == event.ExecutionInterrupted || e.Type == event.PromptCancelled:
			if e.p.Reason == event.ReasonUser && (ck.interruptedBefore(sid, e) || ck.endedByOwnReply(tr) || ck.cancelledWithReplyEnd(sid, e)) {
				continue
			}
			ck.fail(sid, e, RuleChildOwnPrompt, "prompt %s (client id %s), which a client sent child %s, ends %s, but no interrupt was sent to the child before it, nor did a reply to the child's question end its turn",
				pid, tr.admitted.p.ClientID, sid, endName(*e))
		}
	}
}

// interruptedBefore reports whether a client sent an interrupt to session
// sid before e committed.
func (ck *checker) interruptedBefore(sid string, e *rec) bool {
	for _, in := range ck.ledger.InterruptsSent {
		if in.Session == sid && (in.Sent == 0 || e.gseq == 0 || in.Sent < e.gseq) {
			return true
		}
	}
	return false
}

// cancelledWithReplyEnd reports whether e, a prompt.cancelled, is one of
// the queued prompts cancelled with the end of a turn of the session that
// a client's reply ended (a cancelled question, a rejected call): that
// cancels the queue "exactly as POST …/interrupt would" (docs/api.md,
// Questions), in the same transaction, so the end comes right before
// e's run of cancellations in the session's log.
func (ck *checker) cancelledWithReplyEnd(sid string, e *rec) bool {
	if e.Type != event.PromptCancelled {
		return false
	}
	log := ck.h.logs[sid]
	for i := int(e.Seq) - 2; i >= 0 && i < len(log); i-- {
		prev := &log[i]
		if prev.Type == event.PromptCancelled {
			continue
		}
		tr := ck.turns[prev.p.PromptID]
		return prev.Type == event.ExecutionInterrupted && prev.p.Reason == event.ReasonUser && tr != nil && ck.endedByOwnReply(tr)
	}
	return false
}

// endedByOwnReply reports whether a client's reply to one of tr's
// questions or permission requests ended it (a cancel, a reject).
func (ck *checker) endedByOwnReply(tr *turn) bool {
	for _, q := range ck.questionsOf(tr.id) {
		if endsByReply(q.resolved) {
			return true
		}
	}
	return false
}
