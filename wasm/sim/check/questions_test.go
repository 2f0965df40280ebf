package check_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// The question fixture keeps every rule, the question rules included: a
// turn waiting for an answer, with a prompt queued behind it, is not a
// prompt that never ended.
func TestCleanQuestionHistoryHasNoViolations(t *testing.T) {
	path, ledger, _ := questionFixture(t)
	res, err := check.Tree(path, ledger, check.Options{Label: "questions"})
	require.NoError(t, err)
	var all []string
	for _, v := range res.Violations {
		all = append(all, v.String())
	}
	assert.Empty(t, all)
	assert.Equal(t, 4, res.Questions)
	assert.Equal(t, 1, res.Answered)
	assert.Equal(t, 2, res.Cancelled, "one by its reply, one by the interrupt")
	assert.Equal(t, 1, res.Continued)
	assert.Equal(t, map[string]int{"succeeded": 1, "interrupted:user": 2}, res.Ends)
}

// eventOf is SQL selecting the seq of the event of a type about a question
// (its blocker_id).
func eventOf(typ event.Type, qid string) string {
	return fmt.Sprintf(`(SELECT seq FROM events WHERE session_id = 'q' AND type = '%s' AND json_extract(data, '$.blocker_id') = '%s')`, typ, qid)
}

// For every question rule, a history broken the way a bug would break it,
// and the checker names that rule.
func TestBrokenQuestionHistoriesAreCaught(t *testing.T) {
	path, clean, qs := questionFixture(t)
	answeredSeq := queryInt(t, path, `SELECT `+eventOf(event.QuestionAnswered, qs.answered))
	continued := queryInt(t, path, fmt.Sprintf(`SELECT seq FROM events WHERE session_id = 'q' AND type = '%s' AND json_extract(data, '$.cause') = 'resolution'`, event.ExecutionStarted))
	require.Greater(t, continued, answeredSeq)
	waitingPrompt := fmt.Sprintf(`'%s'`, queryText(t, path, fmt.Sprintf(`SELECT json_extract(data, '$.prompt_id') FROM events WHERE session_id = 'q' AND type = '%s' AND json_extract(data, '$.blockers[0].id') = '%s'`, event.StepParked, qs.waiting)))
	lastGseq := queryInt(t, path, `SELECT MAX(gseq) FROM events`)
	cases := []tamperCase{
		{name: "question answered twice", want: check.RuleQuestionOnce, detail: "resolved again",
			sql: []string{appendEvent("q", event.QuestionAnswered, fmt.Sprintf(`json_object('blocker_id', '%s', 'response_id', 'r2')`, qs.answered))}},
		{name: "question answered after the interrupt cancelled it", want: check.RuleQuestionOnce, detail: "resolved again",
			sql: []string{appendEvent("q", event.QuestionAnswered, fmt.Sprintf(`json_object('blocker_id', '%s', 'response_id', 'r1')`, qs.interrupted))}},
		{name: "a losing reply answered 200", want: check.RuleQuestionOnce, detail: "answered 200, but",
			ledger: func(l *check.Ledger) { l.Replies[1].Status = 200 }},
		{name: "a 409 naming the wrong winner", want: check.RuleQuestionOnce, detail: "naming winner",
			ledger: func(l *check.Ledger) { l.Replies[1].Winner = "r2" }},
		{name: "the winner's repeat refused", want: check.RuleQuestionOnce, detail: "although it is the winner",
			ledger: func(l *check.Ledger) { l.Replies[2].Status, l.Replies[2].Winner = 409, "r1" }},
		{name: "another body under the winner's response_id answered 200", want: check.RuleQuestionOnce, detail: "answered 200 with two different bodies",
			ledger: func(l *check.Ledger) { l.Replies[2].Body = strings.Replace(l.Replies[2].Body, "green", "red", 1) }},
		{name: "answered by no client", want: check.RuleQuestionByClient, detail: "which no client sent",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.response_id', 'ghost') WHERE session_id = 'q' AND seq = %d`, answeredSeq)}},
		{name: "answered without a response id (by the sweep)", want: check.RuleQuestionByClient, detail: "without a response_id",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_remove(data, '$.response_id') WHERE session_id = 'q' AND seq = %d`, answeredSeq)}},
		{name: "cancelled by a shutdown", want: check.RuleQuestionByClient, detail: "only a reply",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.reason', 'shutdown') WHERE session_id = 'q' AND seq = %s`, eventOf(event.QuestionCancelled, qs.interrupted))}},
		{name: "cancelled as by an interrupt, the turn ended otherwise", want: check.RuleQuestionByClient, detail: "did not end by the user's interrupt",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.reason', 'interrupt') WHERE session_id = 'q' AND seq = %s`, eventOf(event.QuestionCancelled, qs.cancelled)),
				fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.reason', 'shutdown') WHERE session_id = 'q' AND type = '%s' AND seq > %s`, event.ExecutionInterrupted, eventOf(event.QuestionCancelled, qs.cancelled))}},
		{name: "a pending question missing from a listing", want: check.RuleQuestionListed, detail: "missing from the listing",
			ledger: func(l *check.Ledger) {
				l.Listings = append(l.Listings, check.Listing{Session: "q", At: 1, Sent: lastGseq, Answered: lastGseq, IDs: []string{}})
			}},
		{name: "a resolved question listed", want: check.RuleQuestionListed, detail: "after it was resolved",
			ledger: func(l *check.Ledger) {
				l.Listings = append(l.Listings, check.Listing{Session: "q", At: 1, Sent: lastGseq, Answered: lastGseq, IDs: []string{qs.waiting, qs.answered}})
			}},
		{name: "an asked question answered 404", want: check.RuleQuestionListed, detail: "answered 404",
			ledger: func(l *check.Ledger) {
				l.Replies = append(l.Replies, check.Reply{Session: "q", Question: qs.waiting, ResponseID: "r9", Status: 404, Sent: lastGseq, Answered: lastGseq})
			}},
		{name: "continued before the answer committed", want: check.RuleContinuation, detail: "is not answered",
			sql: []string{
				fmt.Sprintf(`UPDATE events SET seq = -1 WHERE session_id = 'q' AND seq = %d`, answeredSeq),
				fmt.Sprintf(`UPDATE events SET seq = %d WHERE session_id = 'q' AND seq = %d`, answeredSeq, continued),
				fmt.Sprintf(`UPDATE events SET seq = %d WHERE session_id = 'q' AND seq = -1`, continued),
			}},
		{name: "a parked turn restarted without its resolution", want: check.RuleContinuation, detail: "without the resolution",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.cause', 'prompt') WHERE session_id = 'q' AND seq = %d`, continued)}},
		{name: "a parked turn resumed", want: check.RuleContinuation, detail: "is resumed while a question is pending",
			sql: []string{appendEvent("q", event.ExecutionResumed, fmt.Sprintf(`json_object('prompt_id', %s, 'execution_id', 'x', 'attempt', 1)`, waitingPrompt))}},
		{name: "a step of a parked turn", want: check.RuleContinuation, detail: "before any continuation",
			sql: []string{appendEvent("q", event.StepStarted, fmt.Sprintf(`json_object('prompt_id', %s, 'step_id', 'late', 'index', 2)`, waitingPrompt))}},
		{name: "answered and never continued", want: check.RuleContinuation, detail: "never continued",
			sql: []string{appendEvent("q", event.QuestionAnswered, fmt.Sprintf(`json_object('blocker_id', '%s', 'response_id', 'r9')`, qs.waiting))},
			ledger: func(l *check.Ledger) {
				l.Replies = append(l.Replies, check.Reply{Session: "q", Question: qs.waiting, ResponseID: "r9"})
			}},
		{name: "cancelled by a reply that answered", want: check.RuleQuestionByClient, detail: "which no client sent",
			ledger: func(l *check.Ledger) {
				for i := range l.Replies {
					if l.Replies[i].Question == qs.cancelled {
						l.Replies[i].Cancel = false // r3 sent as an answer: it cannot have cancelled
					}
				}
			}},
		{name: "cancelled as a sibling with no reply cancelling its step", want: check.RuleQuestionByClient, detail: "cancelled as a sibling",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.reason', 'sibling') WHERE session_id = 'q' AND seq = %s`, eventOf(event.QuestionCancelled, qs.interrupted))}},
		{name: "a parked turn ended by a shutdown", want: check.RuleContinuation, detail: "a kill, shutdown or eviction must leave it waiting",
			sql: []string{appendEvent("q", event.ExecutionInterrupted, fmt.Sprintf(`json_object('prompt_id', %s, 'execution_id', 'x', 'reason', 'shutdown')`, waitingPrompt))}},
		{name: "claimed while waiting for an answer", want: check.RuleQuiescence, detail: "waits for an answer",
			sql: []string{`INSERT INTO claims (session_id, claimed_at) VALUES ('q', 0)`}},
	}
	requireCaught(t, path, clean, "seed 7 tree 3", cases)
}

// A listing whose request was sent before a question's resolution
// committed, and answered after, may still show it: the resolution may
// have committed after the list was read.
func TestAQuestionResolvedWhileItWasListedMayBeListed(t *testing.T) {
	path, clean, qs := questionFixture(t)
	resolved := queryInt(t, path, fmt.Sprintf(`SELECT gseq FROM events WHERE session_id = 'q' AND seq = %s`, eventOf(event.QuestionAnswered, qs.answered)))
	l := *clean
	l.Listings = append(append([]check.Listing(nil), clean.Listings...),
		check.Listing{Session: "q", At: 1, Sent: resolved - 1, Answered: resolved, IDs: []string{qs.answered}})
	res, err := check.Tree(path, &l, check.Options{Label: "questions"})
	require.NoError(t, err)
	assert.Empty(t, res.Violations)

	// The twin: sent once it had committed, the listing must not show it.
	l.Listings[len(l.Listings)-1].Sent = resolved
	res, err = check.Tree(path, &l, check.Options{Label: "questions"})
	require.NoError(t, err)
	require.Len(t, res.Violations, 1)
	assert.Contains(t, res.Violations[0].Detail, "after it was resolved")
}

// queryText reads one text value from a tree file.
func queryText(t *testing.T, path, query string) string {
	t.Helper()
	var s string
	queryOne(t, path, query, func(st *sqlite3.Stmt) { s = st.ColumnText(0) })
	return s
}

// tamperCase is one broken history of a question fixture: the clean tree
// tampered by sql, its ledger changed by ledger, and the violation the
// checker must report (its rule, a part of its detail).
type tamperCase struct {
	name   string
	sql    []string
	ledger func(l *check.Ledger)
	want   check.Rule
	detail string
}

// requireCaught checks each case on its own copy of the clean tree at path
// and of its ledger (replies and listings copied, so a case's changes stay
// its own): the checker reports the case's violation.
func requireCaught(t *testing.T, path string, clean *check.Ledger, label string, cases []tamperCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := copyTree(t, path)
			tamper(t, p, c.sql...)
			l := *clean
			l.Replies = append([]check.Reply(nil), clean.Replies...)
			l.Listings = append([]check.Listing(nil), clean.Listings...)
			if c.ledger != nil {
				c.ledger(&l)
			}
			res, err := check.Tree(p, &l, check.Options{Label: label})
			require.NoError(t, err)
			var found bool
			var all []string
			for _, v := range res.Violations {
				all = append(all, v.String())
				found = found || (v.Rule == c.want && strings.Contains(v.Detail, c.detail))
			}
			require.True(t, found, "want a %s violation with %q, got:\n%s", c.want, c.detail, strings.Join(all, "\n"))
		})
	}
}

// A turn ended by the user's interrupt needs a cause a client gave. A
// client's reply that ends the turn is one: a cancelled question, or a
// permission request rejected without a message; a reject with a message
// is feedback for the model and ends nothing, so a turn that ended on one
// was stopped for no cause.
func TestInterruptCauseIsAReplyThatEndsTheTurn(t *testing.T) {
	path, ledger, qs := questionFixture(t)
	causeless := func(reply string) []string {
		p := copyTree(t, path)
		tamper(t, p, fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.reply', json('%s')) WHERE session_id = 'q' AND seq = %s`,
			event.PermissionRejected, reply, eventOf(event.QuestionCancelled, qs.cancelled)))
		return violationsOf(t, p, ledger, check.RuleInterruptCause)
	}
	assert.Empty(t, causeless(`{}`), "a plain reject ends the turn")
	got := causeless(`{"message":"not now"}`)
	require.Len(t, got, 1, "a reject with a message ends nothing")
	assert.Contains(t, got[0], "ends interrupted:user, but no interrupt was sent")

	// The fixture's interrupt is the cause of the third turn's end: without
	// it in the ledger, or answered before that turn was admitted, that
	// end has none.
	assert.Len(t, violationsOf(t, path, &check.Ledger{Replies: ledger.Replies, Listings: ledger.Listings}, check.RuleInterruptCause), 1,
		"the interrupt left out of the ledger")
	l := *ledger
	l.Interrupts = []check.Interrupt{{Session: "q", At: 1, Sent: 1, Answered: 1}}
	assert.Len(t, violationsOf(t, path, &l, check.RuleInterruptCause), 1, "an interrupt answered before the turn was admitted")
}
