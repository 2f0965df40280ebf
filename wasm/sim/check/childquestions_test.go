package check_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// Children's questions and permission requests are judged as the root's,
// and a parent waiting on a child that waits for an answer is visibly
// waiting, not a prompt that never ended: the child-question fixture is
// clean.
func TestCleanChildQuestionHistoryHasNoViolations(t *testing.T) {
	path, ledger, _ := childQuestionFixture(t)
	res, err := check.Tree(path, ledger, check.Options{Label: "child questions"})
	require.NoError(t, err)
	var all []string
	for _, v := range res.Violations {
		all = append(all, v.String())
	}
	assert.Empty(t, all, strings.Join(all, "\n"))
	assert.Equal(t, 6, res.Sessions, "the root and five children")
	assert.Equal(t, 4, res.Questions, "three questions and one permission request: the always rule covers the second call")
	assert.Equal(t, 2, res.Answered)
	assert.Equal(t, 4, res.ChildQuestions)
	assert.Equal(t, 2, res.ChildAnswered)
	assert.Equal(t, 1, res.WaitingOnChild, "the root waits on a.5")
	assert.Equal(t, 1, res.AlwaysRules)
	assert.Equal(t, 5, res.Continued, "two children from their answer and approval, their parent from each child's end, and the parent of the child the always rule let run")
}

// For each way a bug could break a child's question, permission request or
// the chain of waits above it, a history broken so, and the checker names
// the rule.
func TestBrokenChildQuestionHistoriesAreCaught(t *testing.T) {
	path, clean, ids := childQuestionFixture(t)
	// The rule a.2's always reply saved, and a.2's call's step completion.
	ruleSaved := fmt.Sprintf(`(SELECT seq FROM events WHERE session_id = 'a.2' AND type = '%s')`, event.PermissionRuleSaved)
	stepDone := fmt.Sprintf(`(SELECT seq FROM events WHERE session_id = 'a.2' AND type = '%s' AND json_extract(data, '$.tool_calls[0].name') = 'ahook')`, event.StepCompleted)
	answer := func(session, qid, responseID string) string {
		return appendEvent(session, event.QuestionAnswered, fmt.Sprintf(`json_object('blocker_id', '%s', 'call_id', %s, 'response_id', '%s')`,
			qid, fmt.Sprintf(`(SELECT json_extract(data, '$.blockers[0].call_id') FROM events WHERE type = '%s' AND json_extract(data, '$.blockers[0].id') = '%s')`, event.StepParked, qid), responseID))
	}
	waitingPrompt := fmt.Sprintf(`(SELECT json_extract(data, '$.prompt_id') FROM events WHERE session_id = 'a.5' AND type = '%s')`, event.PromptAdmitted)
	sent := func(qid, responseID string) func(l *check.Ledger) {
		return func(l *check.Ledger) {
			l.Replies = append(l.Replies, check.Reply{Session: askRoot, Question: qid, ResponseID: responseID})
		}
	}
	cases := []tamperCase{
		{name: "a child's answered question never resumes the child", want: check.RuleContinuation, detail: "never continued",
			sql: []string{answer("a.5", ids.waiting, "r9")}, ledger: sent(ids.waiting, "r9")},
		{name: "a child answered and ended, its parent never given the result", want: check.RuleTaskResult, detail: "never got its result",
			sql: []string{
				answer("a.5", ids.waiting, "r9"),
				appendEvent("a.5", event.ExecutionStarted, fmt.Sprintf(`json_object('execution_id', 'x9', 'prompt_id', %s, 'cause', 'resolution')`, waitingPrompt)),
				appendEvent("a.5", event.ExecutionSucceeded, fmt.Sprintf(`json_object('execution_id', 'x9', 'prompt_id', %s)`, waitingPrompt)),
			}, ledger: sent(ids.waiting, "r9")},
		{name: "a child's question cancelled, the chain above it still waiting", want: check.RuleEnds, detail: "never ended",
			sql: []string{appendEvent("a.5", event.QuestionCancelled, fmt.Sprintf(`json_object('blocker_id', '%s', 'response_id', 'r9', 'reason', 'reply')`, ids.waiting))},
			ledger: func(l *check.Ledger) {
				l.Replies = append(l.Replies, check.Reply{Session: askRoot, Question: ids.waiting, ResponseID: "r9", Cancel: true})
			}},
		{name: "a child's question answered twice", want: check.RuleQuestionOnce, detail: "resolved again",
			sql: []string{answer("a.1", ids.answered, "r8")}, ledger: sent(ids.answered, "r8")},
		{name: "a background child's question answered by no client", want: check.RuleQuestionByClient, detail: "which no client sent",
			sql: []string{answer("a.4", ids.background, "ghost")}},
		{name: "the parent's wait ends when its asking child parks", want: check.RuleTaskResult, detail: "resolved before child a.1's turn ended",
			sql: []string{moveLast("a.1", event.ExecutionSucceeded)}},
		{name: "a child's pending question missing from the root's listing", want: check.RuleQuestionListed, detail: "missing from the listing",
			ledger: func(l *check.Ledger) {
				last := l.Listings[len(l.Listings)-1]
				l.Listings = append(l.Listings, check.Listing{Session: askRoot, At: last.At, Sent: last.Sent, Answered: last.Answered, IDs: []string{ids.waiting}})
			}},
		{name: "a child's always reply saves no rule", want: check.RuleAlways, detail: "no rule allowing ahook",
			sql: []string{`DELETE FROM events WHERE session_id = 'a.2' AND seq = ` + ruleSaved}},
		{name: "a request asked although an always rule allowed it", want: check.RuleAlways, detail: "allowed before its step completed",
			// Swap the gseqs of the saved rule and the record just before
			// the step's completion: the rule commits before the step.
			sql: []string{
				fmt.Sprintf(`UPDATE events SET gseq = -gseq WHERE session_id = 'a.2' AND seq IN (%s, %s - 1)`, ruleSaved, stepDone),
				fmt.Sprintf(`UPDATE events SET gseq = -(SELECT gseq FROM events WHERE session_id = 'a.2' AND seq = %s - 1) WHERE session_id = 'a.2' AND seq = %s`, stepDone, ruleSaved),
				fmt.Sprintf(`UPDATE events SET gseq = (SELECT MAX(gseq) + 1 FROM events) WHERE session_id = 'a.2' AND seq = %s - 1`, stepDone),
			}},
		{name: "a child left waiting on its question after its job ended", want: check.RuleOrphanChild, detail: "waits for an answer at quiescence, but its job ended",
			sql: []string{appendEvent(askRoot, event.JobEnded, fmt.Sprintf(`json_object('child_id', 'a.5', 'call_id', %s)`, callOf("a.5")))}},
		{name: "a child continued from its reply after its job ended", want: check.RuleOrphanChild, detail: "continued from a resolution after its job ended",
			sql: []string{
				appendEvent(askRoot, event.JobEnded, fmt.Sprintf(`json_object('child_id', 'a.5', 'call_id', %s)`, callOf("a.5"))),
				answer("a.5", ids.waiting, "r9"),
				appendEvent("a.5", event.ExecutionStarted, fmt.Sprintf(`json_object('execution_id', 'x9', 'prompt_id', %s, 'cause', 'resolution')`, waitingPrompt)),
			}, ledger: sent(ids.waiting, "r9")},
		{name: "a call executing after its permission request was rejected", want: check.RuleApproval, detail: "without a committed approval",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 'a.2' AND type = '%s'`, event.PermissionRejected, event.PermissionApproved)}},
		// Permission requests are cancelled only by the user's interrupt
		// or as a sibling, never by the person's reply.
		{name: "a permission request cancelled by a shutdown", want: check.RuleQuestionByClient, detail: "is cancelled for \"shutdown\"",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.reason', 'shutdown') WHERE session_id = 'a.2' AND type = '%s'`,
				event.PermissionCancelled, event.PermissionApproved)}},
		{name: "a parent waiting on a child claimed", want: check.RuleQuiescence, detail: "waits for an answer",
			sql: []string{`INSERT INTO claims (session_id, claimed_at) VALUES ('a', 0)`}},
	}
	requireCaught(t, path, clean, "seed 7 tree 9", cases)
}
