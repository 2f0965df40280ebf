package check

import (
	"encoding/json"

	"github.com/revenantrt/revenant/core/event"
)

// RuleInterruptCause: a root session's turn ends interrupted by the user
// (and a queued prompt of it is cancelled as the user's) only for a cause
// a client gave: an interrupt sent to the session that may have committed
// between the prompt's admission and its end (the ledger's
// InterruptsSent), or a client's reply that ended the turn (a cancelled
// question, a permission rejected without a message), which cancels the
// queue as an interrupt would. A turn stopped for no such cause is work
// no client asked to lose. Sub-agents' turns have rules of their own
// (RuleTaskEndReason, RuleChildOwnPrompt).
const RuleInterruptCause Rule = "interrupt-has-cause"

// interruptCauses judges every root prompt that ended as the user's
// interrupt (RuleInterruptCause).
func (ck *checker) interruptCauses() {
	for _, pid := range ck.admitted {
		tr := ck.turns[pid]
		e := tr.end
		sid := tr.admitted.SessionID
		if e == nil || ck.sub.parents[sid] != "" || e.p.Reason != event.ReasonUser {
			continue
		}
		if e.Type != event.ExecutionInterrupted && e.Type != event.PromptCancelled {
			continue
		}
		if ck.interruptedBefore(sid, tr, e) || ck.endedByOwnReply(tr) || ck.cancelledWithReplyEnd(sid, e) {
			continue
		}
		ck.fail(sid, e, RuleInterruptCause, "prompt %s ends %s, but no interrupt was sent to the session while it was open, nor did a reply end its turn",
			pid, endName(*e))
	}
}

// replyMessage is the message a resolution's stored reply carries (a
// permission reject's feedback for the model), "" if none.
func replyMessage(r *rec) string {
	var reply struct {
		Message string `json:"message"`
	}
	if len(r.p.Reply) == 0 || json.Unmarshal(r.p.Reply, &reply) != nil {
		return ""
	}
	return reply.Message
}
