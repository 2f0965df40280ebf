package check

import (
	"slices"
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
// child session's prompt with a client id of the simulator's clients
// (clientPrompt). Named positively, so that a stray prompt in a child (no
// client id, or one core made up) still counts as a task turn to judge.
func (ck *checker) ownPrompt(tr *turn) bool {
	return ck.sub.parents[tr.admitted.SessionID] != "" && clientPrompt(tr.admitted.p.ClientID)
}

// ownTurn reports whether tr is a turn of a child's own, not its task
// turn: a prompt a client sent it (ownPrompt), or the completion notice of
// one of its own background children (a child that tasks in the
// background is a parent too).
func (ck *checker) ownTurn(tr *turn) bool {
	return ck.ownPrompt(tr) || ck.sub.parents[tr.admitted.SessionID] != "" && strings.HasPrefix(tr.admitted.p.ClientID, noticeClient)
}

// clientPrompt reports whether id is a client id the simulator's clients
// give their prompts: "c" and a number (wasm/sim's workload). Core's own
// prompts are "task-…" and "notice-…".
func clientPrompt(id string) bool {
	n, ok := strings.CutPrefix(id, "c")
	if !ok || n == "" {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
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
			if e.p.Reason == event.ReasonUser && (ck.interruptedBefore(sid, tr, e) || ck.endedByOwnReply(tr) || ck.cancelledWithReplyEnd(sid, e)) {
				continue
			}
			ck.fail(sid, e, RuleChildOwnPrompt, "prompt %s (client id %s), which a client sent child %s, ends %s, but no interrupt was sent to the child before it, nor did a reply to the child's question end its turn",
				pid, tr.admitted.p.ClientID, sid, endName(*e))
		}
	}
}

// interruptedBefore reports whether an interrupt a client sent to session
// sid may have committed between tr's admission and e, tr's end: sent
// before e committed, and not answered before tr was admitted (an
// interrupt answered earlier committed earlier, and cannot have ended a
// prompt admitted after it). An interrupt never answered (its instance
// was killed) is bounded by its send alone. A position of 0 is unknown.
// The interrupts answered count too, for a ledger that records only those.
func (ck *checker) interruptedBefore(sid string, tr *turn, e *rec) bool {
	for _, in := range slices.Concat(ck.ledger.InterruptsSent, ck.ledger.Interrupts) {
		if in.Session != sid {
			continue
		}
		sentBefore := in.Sent == 0 || e.gseq == 0 || in.Sent < e.gseq
		answeredAfter := in.Answered == 0 || tr.admitted.gseq == 0 || in.Answered >= tr.admitted.gseq
		if sentBefore && answeredAfter {
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
// e's run of cancellations in the session's log, but for the job ends of
// the turn's foreground children, which the end writes after it.
func (ck *checker) cancelledWithReplyEnd(sid string, e *rec) bool {
	if e.Type != event.PromptCancelled {
		return false
	}
	log := ck.h.logs[sid]
	for i := int(e.Seq) - 2; i >= 0 && i < len(log); i-- {
		prev := &log[i]
		if prev.Type == event.PromptCancelled || prev.Type == event.JobEnded {
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
