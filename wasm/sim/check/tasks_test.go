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

// The sub-agent fixture keeps every rule: foreground, background, nested,
// resumed and interrupted children are judged clean.
func TestCleanTaskHistoryHasNoViolations(t *testing.T) {
	path, ledger := taskFixture(t)
	res, err := check.Tree(path, ledger, check.Options{Label: "tasks"})
	require.NoError(t, err)
	var all []string
	for _, v := range res.Violations {
		all = append(all, v.String())
	}
	assert.Empty(t, all)
	assert.Equal(t, 10, res.Sessions, "the root and nine sub-agents")
	assert.Zero(t, res.Questions, "a task blocker is no question")
	assert.Equal(t, 2, res.Resumes, "the two children killed in their bodies")
}

// callOf is SQL for the call id of a child's job.
func callOf(child string) string {
	return fmt.Sprintf(`(SELECT json_extract(data, '$.call_id') FROM events WHERE type = '%s' AND json_extract(data, '$.child_id') = '%s')`, event.JobStarted, child)
}

// lastOf is SQL for the seq of the last event of a type in a session.
func lastOf(session string, typ event.Type) string {
	return fmt.Sprintf(`(SELECT MAX(seq) FROM events WHERE session_id = '%s' AND type = '%s')`, session, typ)
}

// moveLast makes an event of a session commit last in the tree.
func moveLast(session string, typ event.Type) string {
	return fmt.Sprintf(`UPDATE events SET gseq = (SELECT MAX(gseq) + 1 FROM events) WHERE session_id = '%s' AND seq = %s`, session, lastOf(session, typ))
}

// abandon is SQL turning a child's successful task turn into one recovery
// gave up as an orphan (failed{aborted} with core's message), its job's
// end and its result following in the same commit, as a plant of recovery
// would leave them.
func abandon(child string) string {
	return fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.type', 'aborted', '$.message', 'The sub-agent''s turn was abandoned: no running job of its parent waits for it.')
		WHERE session_id = '%s' AND seq = %s`, event.ExecutionFailed, child, lastOf(child, event.ExecutionSucceeded))
}

// For every sub-agent rule, a history broken the way a bug would break it,
// and the checker names that rule.
func TestBrokenTaskHistoriesAreCaught(t *testing.T) {
	path, clean := taskFixture(t)
	notice := fmt.Sprintf(`(SELECT seq FROM events WHERE session_id = 'p' AND type = '%s' AND json_extract(data, '$.client_id') = 'notice-p.2-1')`, event.PromptAdmitted)
	cases := []struct {
		name   string
		sql    []string
		ledger func(*check.Ledger) // changes the clean ledger, if set
		want   check.Rule
		detail string
	}{
		{name: "a re-run call spawns a second child", want: check.RuleChildOnce, detail: "records a second job",
			sql: []string{appendEvent("p", event.JobStarted, fmt.Sprintf(`json_object('child_id', 'p.99', 'call_id', %s)`, callOf("p.1")))}},
		{name: "a child runs a second turn for its one call", want: check.RuleChildOnce, detail: "runs 2 turns for 1 task call",
			sql: []string{
				// A turn of the child's own (a prompt a client sent it,
				// client id c<n>) is no task turn; this stray one, with no
				// client id, is counted as one.
				appendEvent("p.1", event.PromptAdmitted, `json_object('prompt_id', 'again', 'text', 'hello child', 'mode', 'queue')`),
				appendEvent("p.1", event.ExecutionStarted, `json_object('execution_id', 'x2', 'prompt_id', 'again', 'cause', 'prompt', 'turn_start', json('true'))`),
				appendEvent("p.1", event.ExecutionSucceeded, `json_object('execution_id', 'x2', 'prompt_id', 'again')`),
			}},
		{name: "a child given its task twice", want: check.RuleChildOnce, detail: "given its task 2 times",
			sql: []string{appendEvent("p.1", event.PromptAdmitted, fmt.Sprintf(`json_object('prompt_id', 'again', 'client_id', 'task-' || %s || '-rerun', 'text', 'hello child', 'mode', 'queue')`, callOf("p.1")))}},
		{name: "a child no job names", want: check.RuleChildOnce, detail: "no job names it",
			sql: []string{`INSERT INTO events (session_id, seq, id, type, at, data, gseq) SELECT 'p.99', 1, 'stray', '` + string(event.SessionCreated) +
				`', MAX(at), json_object('parent_id', 'p', 'root_id', 'p', 'principal', 'tester', 'config', json('{}')), MAX(gseq) + 1 FROM events`}},
		// The store refuses a client id twice in a session, so a doubled
		// notice is one whose id was not stable.
		{name: "a background notice admitted twice", want: check.RuleNoticeOnce, detail: "admitted 2 times",
			sql: []string{appendEvent("p", event.PromptAdmitted, `json_object('prompt_id', 'dup', 'client_id', 'notice-p.2-2', 'text', 'again', 'mode', 'queue')`)}},
		{name: "a background notice lost", want: check.RuleNoticeOnce, detail: "no notice reached its parent",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.client_id', 'c9') WHERE session_id = 'p' AND seq = %s`, notice)}},
		{name: "a background notice before its child ended", want: check.RuleNoticeOnce, detail: "before its turn ended",
			sql: []string{moveLast("p.2", event.ExecutionSucceeded)}},
		{name: "a notice for a foreground child", want: check.RuleNoticeOnce, detail: "for foreground child p.1",
			sql: []string{appendEvent("p", event.PromptAdmitted, `json_object('prompt_id', 'fg', 'client_id', 'notice-p.1-1', 'text', 'no', 'mode', 'queue')`)}},
		{name: "a job never settled", want: check.RuleJobSettled, detail: "still running at quiescence",
			sql: []string{`DELETE FROM events WHERE session_id = 'p' AND seq = ` + lastOf("p", event.JobEnded)}},
		{name: "a job ended twice", want: check.RuleJobSettled, detail: "ends again",
			sql: []string{appendEvent("p", event.JobEnded, fmt.Sprintf(`json_object('child_id', 'p.1', 'call_id', %s)`, callOf("p.1")))}},
		{name: "a background job ended before its child", want: check.RuleJobSettled, detail: "ends before its child's turn did",
			sql: []string{moveLast("p.2", event.ExecutionSucceeded)}},
		// p.6 was interrupted with its parent's fifth turn, p's first
		// turn to end interrupted.
		{name: "a child interrupted as orphaned for its parent's interrupt", want: check.RuleTaskEndReason, detail: "ends interrupted:orphaned, but its parent's turn ended interrupted:user",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.reason', 'orphaned') WHERE session_id = 'p.6' AND seq = %s`, lastOf("p.6", event.ExecutionInterrupted))}},
		{name: "a child interrupted as the user's for a parent that failed", want: check.RuleTaskEndReason, detail: "ends interrupted:user, but its parent's turn ended failed:model",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.type', 'model', '$.message', 'planted') WHERE session_id = 'p' AND seq = (SELECT MIN(seq) FROM events WHERE session_id = 'p' AND type = '%s')`,
				event.ExecutionFailed, event.ExecutionInterrupted)}},
		{name: "a child claim left with no live job", want: check.RuleOrphanChild, detail: "claimed at quiescence",
			sql: []string{`INSERT INTO claims (session_id, claimed_at) VALUES ('p.1', 0)`}},
		{name: "a child resumed after its job ended", want: check.RuleOrphanChild, detail: "resumed (attempt 1) after its job ended",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.attempt', 1) WHERE session_id = 'p.6' AND seq = %s`,
				event.ExecutionResumed, lastOf("p.6", event.ExecutionInterrupted))}},
		// Recovery gives up a child whose job runs (foreground p.1, whose
		// parent's call waits; background p.2): its abort ends the job.
		{name: "a foreground child abandoned while its job runs", want: check.RuleOrphanChild, detail: "p.1's task turn is abandoned",
			sql: []string{abandon("p.1")}},
		{name: "a background child abandoned while its job runs", want: check.RuleOrphanChild, detail: "p.2's task turn is abandoned",
			sql: []string{abandon("p.2")}},
		{name: "a child going on after its parent's interrupt answered", want: check.RuleAfterInterrupt, detail: "succeeded after it",
			sql: []string{
				fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 'p.6' AND seq = %s`, event.ExecutionSucceeded, lastOf("p.6", event.ExecutionInterrupted)),
				moveLast("p.6", event.ExecutionSucceeded),
			}},
		{name: "a child going on after a later interrupt found nothing to stop", want: check.RuleAfterInterrupt, detail: "succeeded after it",
			sql: []string{
				fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 'p.6' AND seq = %s`, event.ExecutionSucceeded, lastOf("p.6", event.ExecutionInterrupted)),
				moveLast("p.6", event.ExecutionSucceeded),
			},
			// The interrupt that stopped the parent's turn went unanswered
			// (a kill); a second one, sent after that turn had ended,
			// answered at once.
			ledger: func(l *check.Ledger) {
				first := l.Interrupts[0]
				l.Interrupts = []check.Interrupt{{Session: first.Session, At: first.At, Sent: first.Answered, Answered: first.Answered}}
			}},
		{name: "a task blocker resolved twice", want: check.RuleTaskResult, detail: "resolved again",
			sql: []string{appendEvent("p", event.TaskResolved, fmt.Sprintf(`json_object('blocker_id', 't-' || %[1]s || '-0', 'call_id', %[1]s)`, callOf("p.1")))}},
		{name: "a task blocker resolved before its child ended", want: check.RuleTaskResult, detail: "resolved before child p.1's turn ended",
			sql: []string{moveLast("p.1", event.ExecutionSucceeded)}},
		{name: "a task call settled with another answer", want: check.RuleTaskResult, detail: "not child p.1's final answer",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.output', 'You said: something else') WHERE type = '%s' AND json_extract(data, '$.call_id') = %s`,
				event.ToolSettled, callOf("p.1"))}},
		{name: "a task blocker cancelled without an interrupt", want: check.RuleTaskResult, detail: "did not end by the user's interrupt",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.reason', 'interrupt') WHERE session_id = 'p' AND type = '%s' AND json_extract(data, '$.call_id') = %s`,
				event.TaskCancelled, event.TaskResolved, callOf("p.1"))}},
		{name: "a task call settled ok from a child that failed", want: check.RuleTaskResult, detail: "but child p.1's turn ended failed:model",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.type', 'model', '$.message', 'boom') WHERE session_id = 'p.1' AND type = '%s'`,
				event.ExecutionFailed, event.ExecutionSucceeded)}},
		// Only the user's interrupt (or a replace prompt) of the parent
		// cancels its child's blocker.
		{name: "a task blocker cancelled as the parent's turn was orphaned", want: check.RuleTaskResult, detail: "did not end by the user's interrupt",
			sql: []string{
				fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.reason', 'interrupt') WHERE session_id = 'p' AND type = '%s' AND json_extract(data, '$.call_id') = %s`,
					event.TaskCancelled, event.TaskResolved, callOf("p.1")),
				fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.reason', 'orphaned') WHERE session_id = 'p' AND seq = %s`,
					event.ExecutionInterrupted, sq("p", event.ExecutionSucceeded, 1)),
			}},
		// Its job not ended, but no call waits for the child any more.
		{name: "a child claim left with a job no call waits on", want: check.RuleOrphanChild, detail: "claimed at quiescence",
			sql: []string{
				fmt.Sprintf(`DELETE FROM events WHERE session_id = 'p' AND type = '%s' AND json_extract(data, '$.child_id') = 'p.1'`, event.JobEnded),
				`INSERT INTO claims (session_id, claimed_at) VALUES ('p.1', 0)`,
			}},
		{name: "a task call never given its result", want: check.RuleTaskResult, detail: "never settled",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.call_id', 'lost') WHERE type = '%s' AND json_extract(data, '$.call_id') = %s`,
				event.ToolSettled, callOf("p.1"))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := copyTree(t, path)
			tamper(t, p, c.sql...)
			l := *clean
			if c.ledger != nil {
				c.ledger(&l)
			}
			res, err := check.Tree(p, &l, check.Options{Label: "seed 7 tree 5"})
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

// A child's task turn interrupted as the user's is right when a client
// interrupted the child itself, whatever its parent's turn did.
func TestTaskEndReasonAcceptsAnInterruptOfTheChild(t *testing.T) {
	path, clean := taskFixture(t)
	p := copyTree(t, path)
	tamper(t, p, fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.type', 'model', '$.message', 'planted') WHERE session_id = 'p' AND seq = (SELECT MIN(seq) FROM events WHERE session_id = 'p' AND type = '%s')`,
		event.ExecutionFailed, event.ExecutionInterrupted))
	assert.Len(t, violationsOf(t, p, clean, check.RuleTaskEndReason), 1, "the parent failed and nobody interrupted the child")
	l := *clean
	l.InterruptsSent = append(append([]check.Interrupt(nil), l.InterruptsSent...), check.Interrupt{Session: "p.6"})
	assert.Empty(t, violationsOf(t, p, &l, check.RuleTaskEndReason), "an interrupt sent to the child")
}
