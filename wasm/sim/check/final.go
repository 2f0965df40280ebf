package check

import (
	"maps"
	"slices"

	"github.com/revenantrt/revenant/core/event"
)

// RuleFinalAsk: an ask the operator made final (a server rule with
// "final": true; the ledger's FinalAsks) is asked at every call. Each
// permission request for such a tool lists the resources it asks about as
// final, an always reply saves no rule for a resource its request lists
// as final (it approves that call only), and no call of the tool runs
// without an approval of its own (docs/api.md, Permission rules and
// Permission requests). A rule saved for it, or a saved rule obeyed over
// it, would let the model past an operator's standing question.
const RuleFinalAsk Rule = "final-ask-kept"

// finalAsks judges the tree's permission requests, saved rules and calls
// against the final asks (RuleFinalAsk).
func (ck *checker) finalAsks() {
	for _, s := range ck.saved {
		if q := ck.questions[s.p.BlockerID]; q != nil && slices.Contains(q.final, s.p.Resource) {
			ck.fail(q.session, s, RuleFinalAsk, "an always reply to permission request %s saved a rule allowing %s on %q, which the request lists as final",
				q.id, s.p.Action, s.p.Resource)
		}
	}
	final := map[string]bool{}
	for _, name := range ck.ledger.FinalAsks {
		final[name] = true
	}
	if len(final) == 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(ck.questions)) {
		q := ck.questions[id]
		if !final[q.action] {
			continue
		}
		for _, res := range q.resources {
			if !slices.Contains(q.final, res) {
				ck.fail(q.session, q.asked, RuleFinalAsk, "permission request %s asks about %s on %q without listing it as final, though the operator's ask on %s is final",
					id, q.action, res, q.action)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ck.calls)) {
		c := ck.calls[id]
		if !final[c.name] || c.executing == nil {
			continue
		}
		if !slices.ContainsFunc(ck.permCalls[id], func(qid string) bool {
			r := ck.questions[qid].resolved
			return r != nil && r.Type == event.PermissionApproved
		}) {
			ck.fail(c.session, c.executing, RuleFinalAsk, "call %s of %s runs without an approval of its own, though the operator's ask on %s is final",
				id, c.name, c.name)
		}
	}
}
