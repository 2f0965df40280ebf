package check

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/revenantrt/revenant/core/event"
)

// RuleAlways: an `always` reply to a permission request saves an exact
// allow rule for each resource the request asked about (but those it
// lists as final: RuleFinalAsk)
// (session.permission.rule_saved@1 naming the request, committed after its
// approval), and a call whose step was recorded complete after those rules
// committed does not ask for what they allow: the runner reads the tree's
// saved rules after the step completed, and an exact saved allow is
// decisive unless the operator denied, which would not ask either (DESIGN
// §9; docs/api.md, Permission requests). A rule lost (by any session of
// the tree, a child's included) makes the person answer again.
const RuleAlways Rule = "always-rule-kept"

// alwaysRules judges the tree's always replies and the requests asked after
// them.
func (ck *checker) alwaysRules() {
	ck.res.AlwaysRules = len(ck.saved)
	byRequest := map[string][]*rec{}
	for _, r := range ck.saved {
		byRequest[r.p.BlockerID] = append(byRequest[r.p.BlockerID], r)
	}
	for _, id := range slices.Sorted(maps.Keys(ck.questions)) {
		q := ck.questions[id]
		if r := q.resolved; r != nil && r.Type == event.PermissionApproved && r.p.ResponseID != "" && replyOf(r) == "always" {
			for _, res := range q.resources {
				if slices.Contains(q.final, res) {
					continue // this call only (RuleFinalAsk)
				}
				if !slices.ContainsFunc(byRequest[id], func(s *rec) bool {
					return s.p.Action == q.action && s.p.Resource == res && s.p.Exact && s.gseq > r.gseq
				}) {
					ck.fail(q.session, r, RuleAlways, "permission request %s is approved always, but no rule allowing %s on %q was saved with it", id, q.action, res)
				}
			}
		}
		ck.askedDespiteRules(q)
	}
}

// askedDespiteRules judges a permission request against the rules saved
// before its call's step completed: they must not allow all it asks about.
func (ck *checker) askedDespiteRules(q *question) {
	c := ck.calls[q.call]
	if q.action == "" || len(q.resources) == 0 || c == nil || c.completed == nil || len(q.final) > 0 {
		return // a final ask is asked whatever was saved (RuleFinalAsk)
	}
	var by []string
	for _, res := range q.resources {
		i := slices.IndexFunc(ck.saved, func(s *rec) bool {
			return s.p.Action == q.action && s.p.Resource == res && s.p.Exact && committedBy(s, c.completed.gseq-1)
		})
		if i < 0 {
			return
		}
		by = append(by, ck.saved[i].p.BlockerID)
	}
	ck.fail(q.session, q.asked, RuleAlways, "permission request %s asks about %s on %v, which the always rules of %v allowed before its step completed (#%d)",
		q.id, q.action, q.resources, by, c.completed.Seq)
}

// replyOf is a permission resolution's reply ("once", "always", "reject").
func replyOf(r *rec) string {
	var body struct {
		Reply string `json:"reply"`
	}
	_ = json.Unmarshal(r.p.Reply, &body)
	return body.Reply
}
