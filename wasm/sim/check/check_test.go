package check_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// The fixture's history keeps every rule: the checker must not cry wolf,
// or every campaign would be noise.
func TestCleanHistoryHasNoViolations(t *testing.T) {
	path, ledger := fixture(t)
	res, err := check.Tree(path, ledger, check.Options{Label: "fixture"})
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	assert.Equal(t, 2, res.Sessions)
	assert.Equal(t, 5, res.Prompts)
	assert.Equal(t, 2, res.Resumes)
	assert.Equal(t, map[string]int{"succeeded": 3, "interrupted:user": 1, "cancelled:user": 1}, res.Ends)
	assert.Equal(t, 5, res.Calls)
	// n:3 reached its receiver twice (once before the kill, once re-run);
	// every other call once.
	assert.Equal(t, 6, res.Deliveries)
}

// An interrupt's events carry the time its write began; a write that
// waited (for storage, or for a zombie's lock) commits later. An effect
// that reached its receiver in between, before the commit by commit
// position though after that time, is no violation (simulator seed 129,
// -zombies 1).
func TestEffectBeforeADelayedInterruptCommitIsClean(t *testing.T) {
	path, clean := fixture(t)
	interruptAt := queryInt(t, path, fmt.Sprintf(`SELECT at FROM events WHERE session_id = 'u' AND type = '%s'`, event.ExecutionInterrupted))
	l := *clean
	l.Deliveries = append([]check.Delivery(nil), clean.Deliveries...)
	d := &l.Deliveries[len(l.Deliveries)-1] // the interrupted hook call, before the interrupt committed
	require.NotZero(t, d.Gseq)
	d.At = interruptAt + 5_000
	res, err := check.Tree(path, &l, check.Options{Label: "fixture"})
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
}

// sq is the seq of the nth (1-based) event of a type in a session, as SQL.
func sq(session string, typ event.Type, nth int) string {
	return fmt.Sprintf(`(SELECT seq FROM events WHERE session_id = '%s' AND type = '%s' ORDER BY seq LIMIT 1 OFFSET %d)`, session, typ, nth-1)
}

// field is a payload field of that event, as SQL.
func field(session string, typ event.Type, nth int, name string) string {
	return fmt.Sprintf(`(SELECT json_extract(data, '$.%s') FROM events WHERE session_id = '%s' AND seq = %s)`, name, session, sq(session, typ, nth))
}

// appendEvent is SQL appending an event to a session's log.
func appendEvent(session string, typ event.Type, data string) string {
	return fmt.Sprintf(`INSERT INTO events (session_id, seq, id, type, at, data, gseq)
		SELECT '%[1]s', MAX(seq) + 1, 'tampered-' || MAX(seq), '%[2]s', MAX(at), %[3]s, (SELECT MAX(gseq) + 1 FROM events)
		FROM events WHERE session_id = '%[1]s'`, session, typ, data)
}

// For every rule, a history broken the way a bug would break it, and the
// checker names that rule.
func TestBrokenHistoriesAreCaught(t *testing.T) {
	path, clean := fixture(t)
	firstPrompt := field("s", event.PromptAdmitted, 1, "prompt_id")
	interrupted := field("u", event.PromptAdmitted, 1, "prompt_id")
	lastGseq := queryInt(t, path, `SELECT MAX(gseq) FROM events`)
	interruptAt := queryInt(t, path, fmt.Sprintf(`SELECT at FROM events WHERE session_id = 'u' AND type = '%s'`, event.ExecutionInterrupted))
	firstAdmitted := queryInt(t, path, fmt.Sprintf(`SELECT gseq FROM events WHERE session_id = 's' AND seq = %s`, sq("s", event.PromptAdmitted, 1)))
	firstSettled := queryInt(t, path, `SELECT `+sq("s", event.ToolSettled, 1))
	secondStep := queryInt(t, path, `SELECT `+sq("s", event.StepStarted, 2))
	firstStep := queryInt(t, path, `SELECT `+sq("s", event.StepStarted, 1))
	firstStepID := field("s", event.StepStarted, 1, "step_id")
	firstSucceeded := queryInt(t, path, `SELECT `+sq("s", event.ExecutionSucceeded, 1))
	// The first turn's last step (its final answer) and how many steps it ran.
	finalStep := queryInt(t, path, fmt.Sprintf(`SELECT MAX(seq) FROM events WHERE session_id = 's' AND type = '%s' AND seq < %d`, event.StepStarted, firstSucceeded))
	finalDone := queryInt(t, path, fmt.Sprintf(`SELECT MAX(seq) FROM events WHERE session_id = 's' AND type = '%s' AND seq < %d`, event.StepCompleted, firstSucceeded))
	firstSteps := queryInt(t, path, fmt.Sprintf(`SELECT COUNT(*) FROM events WHERE session_id = 's' AND type = '%s' AND seq < %d`, event.StepStarted, firstSucceeded))
	executingOf := func(callID string) int64 {
		return queryInt(t, path, fmt.Sprintf(`SELECT gseq FROM events WHERE type = '%s' AND json_extract(data, '$.call_id') = '%s' ORDER BY gseq LIMIT 1`,
			event.ToolExecuting, callID))
	}
	cases := []struct {
		name   string
		sql    []string
		ledger func(l *check.Ledger)
		want   check.Rule
		detail string
		budget int
		// also, if set, must be listed too, with alsoDetail.
		also       check.Rule
		alsoDetail string
	}{
		{name: "gap in seqs", want: check.RuleSeqs, detail: "contiguous",
			sql: []string{`UPDATE events SET seq = seq + 10 WHERE session_id = 's' AND seq = (SELECT MAX(seq) FROM events WHERE session_id = 's')`}},
		{name: "second terminal", want: check.RuleEnds, detail: "after its end",
			sql: []string{appendEvent("s", event.ExecutionSucceeded, fmt.Sprintf(`json_object('prompt_id', %s)`, firstPrompt))}},
		{name: "prompt never ends", want: check.RuleEnds, detail: "never ended",
			sql: []string{`DELETE FROM events WHERE session_id = 's' AND seq = (SELECT MAX(seq) FROM events WHERE session_id = 's')`}},
		{name: "claim left at quiescence", want: check.RuleQuiescence, detail: "no prompt left",
			sql: []string{`INSERT INTO claims (session_id, claimed_at) VALUES ('s', 0)`}},
		{name: "step after the interrupt", want: check.RuleAfterInterrupt, detail: "after its end",
			sql: []string{appendEvent("u", event.StepStarted, fmt.Sprintf(`json_object('prompt_id', %s, 'step_id', 'late', 'index', 2)`, interrupted))}},
		{name: "effect after the interrupt", want: check.RuleAfterInterrupt, detail: "after the interrupt committed",
			ledger: func(l *check.Ledger) {
				d := l.Deliveries[len(l.Deliveries)-1] // the interrupted hook call
				d.At, d.Gseq = d.At+1000, 0            // no commit position known: judged by time
				l.Deliveries = append(l.Deliveries, d)
			}},
		{name: "effect after the interrupt, in the same millisecond", want: check.RuleAfterInterrupt, detail: "after the interrupt committed",
			ledger: func(l *check.Ledger) {
				d := &l.Deliveries[len(l.Deliveries)-1] // the interrupted hook call
				d.At, d.Gseq = interruptAt, lastGseq
			}},
		{name: "effect before its executing record", want: check.RuleEffects, detail: "before its executing record",
			ledger: func(l *check.Ledger) { l.Deliveries[0].Gseq = executingOf(l.Deliveries[0].CallID) - 1 }},
		{name: "interrupt answered before it committed", want: check.RuleAfterInterrupt, detail: "had not ended",
			ledger: func(l *check.Ledger) {
				l.Interrupts = append(append([]check.Interrupt(nil), l.Interrupts...),
					check.Interrupt{Session: "s", At: 1, Sent: firstAdmitted, Answered: firstAdmitted})
			}},
		{name: "retry claim left at quiescence", want: check.RuleQuiescence, detail: "no prompt left",
			sql: []string{`INSERT INTO claims (session_id, claimed_at, retry_at) VALUES ('s', 0, 1)`}},
		{name: "dead execution restarted without counting a resume", want: check.RuleBudget, detail: "without counting a resume",
			sql: []string{
				fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.cause', 'prompt') WHERE session_id = 's' AND seq = (SELECT MIN(seq) FROM events WHERE session_id = 's' AND type = '%s' AND seq > %s)`,
					event.ExecutionStarted, sq("s", event.ExecutionResumed, 1)),
				fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 's' AND seq = %s`, event.Progress, sq("s", event.ExecutionResumed, 1)),
			}},
		{name: "attempt past the budget", want: check.RuleBudget, detail: "past the budget",
			sql: []string{`UPDATE events SET data = json_set(data, '$.attempt', 11) WHERE type = 'session.execution.resumed@1'`}},
		{name: "attempt miscounted", want: check.RuleBudget, detail: "resumes without progress",
			sql: []string{`UPDATE events SET data = json_set(data, '$.attempt', 2) WHERE type = 'session.execution.resumed@1'`}},
		{name: "non-idempotent effect twice", want: check.RuleEffects, detail: "took effect 2 times",
			ledger: func(l *check.Ledger) { l.Deliveries = append(l.Deliveries, l.Deliveries[0]) }},
		{name: "idempotent key applied twice", want: check.RuleEffects, detail: "applied key",
			ledger: func(l *check.Ledger) {
				for i, d := range l.Deliveries {
					if !d.Applied {
						l.Deliveries[i].Applied = true
					}
				}
			}},
		{name: "effect under another key", want: check.RuleEffects, detail: "with key",
			ledger: func(l *check.Ledger) { l.Deliveries[1].Key = "rvn_other" }},
		{name: "effect of an unknown call", want: check.RuleEffects, detail: "no step of the tree made",
			ledger: func(l *check.Ledger) {
				l.Deliveries = append(l.Deliveries, check.Delivery{Tool: "hook", CallID: "ghost", Key: "k", Applied: true})
			}},
		{name: "settlement of a call no step asked for", want: check.RuleEffects, detail: "no completed step asked for it",
			sql: []string{`UPDATE events SET data = json_set(data, '$.call_id', 'ghost') WHERE session_id = 's' AND seq = ` + sq("s", event.ToolSettled, 1)}},
		{name: "two calls under one idempotency key", want: check.RuleEffects, detail: "share idempotency key",
			ledger: func(l *check.Ledger) {
				for i := 1; i < len(l.Deliveries); i++ {
					if d := &l.Deliveries[i]; d.Tool == l.Deliveries[0].Tool && d.CallID != l.Deliveries[0].CallID {
						d.Key = l.Deliveries[0].Key
						return // (with none, the case fails for want of the violation)
					}
				}
			}},
		{name: "executing record of a call no step asked for", want: check.RuleEffects, detail: "no completed step asked for it",
			sql: []string{`UPDATE events SET data = json_set(data, '$.call_id', 'ghost') WHERE session_id = 's' AND seq = ` + sq("s", event.ToolExecuting, 1)}},
		{name: "a one-event log that does not start with its creation", want: check.RuleSeqs, detail: "the log starts with",
			sql: []string{fmt.Sprintf(`INSERT INTO events (session_id, seq, id, type, at, data, gseq)
				SELECT 'lonely', 1, 'tampered-lonely', '%s', MAX(at), json_object('what', 'x'), MAX(gseq) + 1 FROM events`, event.Progress)}},
		{name: "settled ok without its effect", want: check.RuleEffects, detail: "never saw it",
			ledger: func(l *check.Ledger) { l.Deliveries = l.Deliveries[1:] }},
		{name: "projection differs from the log", want: check.RuleProjections, detail: "rebuilt from the log",
			sql: []string{`UPDATE messages SET text = 'tampered' WHERE role = 'user'`}},
		{name: "notice without a resume", want: check.RuleNotices, detail: "without a resume",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.role', 'notice', '$.text', '%s') WHERE session_id = 's' AND seq = %s`,
				event.ContinuationNotice, sq("s", event.MessageAdded, 1))}},
		{name: "resume without its notice", want: check.RuleNotices, detail: "after 0 continuation notices",
			sql: []string{`UPDATE events SET data = json_set(data, '$.role', 'assistant') WHERE json_extract(data, '$.role') = 'notice'`}},
		{name: "step requested again", want: check.RuleSteps, detail: "requested again",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.index', 1) WHERE session_id = 's' AND seq = %s`, sq("s", event.StepStarted, 2))}},
		{name: "zombie step after its successor", want: check.RuleZombie, detail: "replaced it",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.execution_id', %s) WHERE session_id = 's' AND seq = (SELECT MIN(seq) FROM events WHERE session_id = 's' AND type = '%s' AND seq > %s)`,
				field("s", event.ExecutionResumed, 1, "execution_id"), event.StepStarted, sq("s", event.ExecutionResumed, 1))}},
		// The same step start, judged on its own: the replaced execution
		// starts it, not only writes it.
		{name: "zombie starts a step after its successor", want: check.RuleZombie, detail: "starts a step after execution",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.execution_id', %s) WHERE session_id = 's' AND seq = (SELECT MIN(seq) FROM events WHERE session_id = 's' AND type = '%s' AND seq > %s)`,
				field("s", event.ExecutionResumed, 1, "execution_id"), event.StepStarted, sq("s", event.ExecutionResumed, 1))}},
		{name: "notice with the wrong text", want: check.RuleNotices, detail: "the notice reads",
			sql: []string{`UPDATE events SET data = json_set(data, '$.text', 'carry on') WHERE json_extract(data, '$.role') = 'notice'`}},
		{name: "second notice for one resume", want: check.RuleNotices, detail: "a second continuation notice",
			sql: insertAfter("s", noticeSeq(t, path), event.MessageAdded, fmt.Sprintf(`json_set((SELECT data FROM events WHERE session_id = 's' AND seq = %d), '$.message_id', 'again')`, noticeSeq(t, path)))},
		// A resume between the final answer and the turn's end asks the
		// model nothing: a notice there would only stay in the transcript.
		{name: "notice for a resume after the final answer", want: check.RuleNotices, detail: "after 1 continuation notices, want 0",
			sql: slices.Concat(
				insertAfter("s", finalDone, event.ExecutionResumed, fmt.Sprintf(`json_object('execution_id', %s, 'prompt_id', %s, 'attempt', 1)`, field("s", event.ExecutionStarted, 1, "execution_id"), firstPrompt)),
				insertAfter("s", finalDone+1, event.MessageAdded, fmt.Sprintf(`json_object('message_id', 'notice', 'prompt_id', %s, 'role', 'notice', 'text', '%s')`, firstPrompt, event.ContinuationNotice)),
				insertAfter("s", finalDone+2, event.ExecutionStarted, fmt.Sprintf(`json_object('execution_id', 'resumed', 'prompt_id', %s, 'cause', 'resume', 'turn_start', json('false'))`, firstPrompt)))},
		{name: "step requested after the final answer", want: check.RuleSteps, detail: "recorded complete with the final answer",
			sql: insertAfter("s", finalDone, event.StepStarted, fmt.Sprintf(`json_set((SELECT data FROM events WHERE session_id = 's' AND seq = %d), '$.step_id', 'again', '$.index', %d)`, finalStep, firstSteps+1))},
		{name: "prompt cancelled after its turn started", want: check.RuleEnds, detail: "is cancelled after its turn started",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 'u' AND type = '%s'`, event.PromptCancelled, event.ExecutionInterrupted)}},
		{name: "turn starts while the one before is open", want: check.RuleEnds, detail: "starts while the turn of",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 's' AND seq = %d`, event.Progress, firstSucceeded)}},
		{name: "turns started out of admission order", want: check.RuleEnds, detail: "in admission order",
			sql: []string{
				appendEvent("s", event.PromptAdmitted, `json_object('prompt_id', 'pa', 'text', 'a', 'mode', 'queue')`),
				appendEvent("s", event.PromptAdmitted, `json_object('prompt_id', 'pb', 'text', 'b', 'mode', 'queue')`),
				appendEvent("s", event.ExecutionStarted, `json_object('execution_id', 'xb', 'prompt_id', 'pb', 'cause', 'prompt', 'turn_start', json('true'))`),
				appendEvent("s", event.ExecutionSucceeded, `json_object('execution_id', 'xb', 'prompt_id', 'pb')`),
				appendEvent("s", event.ExecutionStarted, `json_object('execution_id', 'xa', 'prompt_id', 'pa', 'cause', 'prompt', 'turn_start', json('true'))`),
				appendEvent("s", event.ExecutionSucceeded, `json_object('execution_id', 'xa', 'prompt_id', 'pa')`),
			}},
		// A replace prompt stops the turn it supersedes for good, as the
		// user's interrupt does.
		{name: "effect after a superseding end", want: check.RuleAfterInterrupt, detail: "after the interrupt committed",
			sql: []string{fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.reason', 'superseded') WHERE session_id = 'u' AND type = '%s'`, event.ExecutionInterrupted)},
			ledger: func(l *check.Ledger) {
				d := l.Deliveries[len(l.Deliveries)-1] // the interrupted hook call
				d.At, d.Gseq = d.At+1000, 0
				l.Deliveries = append(l.Deliveries, d)
			}},
		{name: "turn fails model with a call never settled", want: check.RuleSettled, detail: "the turn ends failed:model while call",
			sql: []string{
				fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 's' AND seq = %d`, event.Progress, firstSettled),
				fmt.Sprintf(`UPDATE events SET type = '%s', data = json_set(data, '$.type', 'model', '$.message', 'boom') WHERE session_id = 's' AND seq = %d`, event.ExecutionFailed, firstSucceeded),
			}},
		{name: "checkpoint overlapping the one before", want: check.RuleCutKeeps, detail: "at offset 0, but its checkpoints so far kept 11 bytes",
			sql: append(withCheckpoint(firstStep, firstStepID),
				insertAfter("s", firstStep+1, event.TextCheckpoint, fmt.Sprintf(`json_object('step_id', %s, 'offset', 0, 'text', 'Never said ')`, firstStepID))...)},
		{name: "cut by its execution drops the checkpoint", want: check.RuleCutKeeps, detail: "that do not begin with the 11 its checkpoints kept",
			sql: append(withCheckpoint(firstStep, firstStepID),
				fmt.Sprintf(`UPDATE events SET type = '%s', data = json_object('step_id', %s, 'text', 'Something else', 'reason', 'stopped') WHERE session_id = 's' AND seq = %s`,
					event.StepCut, firstStepID, sq("s", event.StepCompleted, 1)))},
		{name: "projection row the log rebuilds is missing", want: check.RuleProjections, detail: "is missing stored",
			sql: []string{`DELETE FROM messages WHERE role = 'user'`}},
		{name: "accepted prompt lost", want: check.RuleEnds, detail: "lost",
			ledger: func(l *check.Ledger) { l.Accepted = append(l.Accepted, "p-lost") }},
		// A step that starts, or a turn that ends, with a call of an earlier
		// step still open: the model went on without the call's result.
		{name: "next step before a call settles", want: check.RuleSettled, detail: "starts while call",
			sql: []string{
				fmt.Sprintf(`UPDATE events SET seq = -1 WHERE session_id = 's' AND seq = %d`, firstSettled),
				fmt.Sprintf(`UPDATE events SET seq = %d WHERE session_id = 's' AND seq = %d`, firstSettled, secondStep),
				fmt.Sprintf(`UPDATE events SET seq = %d WHERE session_id = 's' AND seq = -1`, secondStep),
			}},
		{name: "turn succeeds with a call never settled", want: check.RuleSettled, detail: "the turn ends succeeded while call",
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s' WHERE session_id = 's' AND seq = %d`, event.Progress, firstSettled)}},
		// Aborted at the budget's last attempt instead of past it: the
		// resume counted within the budget never started.
		{name: "aborted with a resume within the budget pending", want: check.RuleBudget, detail: "within the budget of 1) is pending",
			budget: 1,
			sql: []string{fmt.Sprintf(`UPDATE events SET type = '%s', data = json_object('prompt_id', %s, 'type', 'aborted') WHERE session_id = 's' AND seq = %s + 1`,
				event.ExecutionFailed, field("s", event.ExecutionResumed, 1, "prompt_id"), sq("s", event.ExecutionResumed, 1))}},
		// A checkpoint of the first step that its completion does not
		// begin with, and the same step cut after a death keeping nothing
		// of it (a cut that drops the checkpoint).
		{name: "completion does not begin with the checkpoint", want: check.RuleCutKeeps, detail: "does not begin with its checkpointed",
			sql: withCheckpoint(firstStep, firstStepID)},
		{name: "cut drops the checkpoint", want: check.RuleCutKeeps, detail: "cut after its execution died keeping 0 bytes",
			sql: append(withCheckpoint(firstStep, firstStepID),
				fmt.Sprintf(`UPDATE events SET type = '%s', data = json_object('step_id', %s, 'text', '', 'reason', 'interrupted') WHERE session_id = 's' AND seq = %s`,
					event.StepCut, firstStepID, sq("s", event.StepCompleted, 1)))},
		{name: "moment seen by the host", want: check.RuleWakeArmed, detail: "no wake-up",
			ledger: func(l *check.Ledger) {
				l.Observed = append(l.Observed, check.Observation{At: 1, Boot: 2, Rule: check.RuleWakeArmed, Session: "s", Detail: "claimed with no wake-up armed"})
			}},
		{name: "zombie commit in the ledger", want: check.RuleZombie, detail: "after boot 2 took over",
			ledger: func(l *check.Ledger) {
				l.ZombieCommits = append(l.ZombieCommits, check.ZombieCommit{At: 1, Boot: 1, Latest: 2, What: "tx_commit"})
			}},
		{name: "durable event never emitted", want: check.RuleEmits, detail: "never reached emit",
			ledger: func(l *check.Ledger) { l.Emits = emitsWithout(t, path, 3) }},
		// A call settled twice is named by its own rule, and the log it
		// leaves cannot be replayed: both are listed, the one not hiding
		// the other.
		{name: "call settled twice", want: check.RuleEffects, detail: "settles twice",
			also: check.RuleProjections, alsoDetail: "the log cannot be replayed",
			sql: insertAfter("s", firstSettled, event.ToolSettled, fmt.Sprintf(`(SELECT data FROM events WHERE session_id = 's' AND seq = %d)`, firstSettled))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := copyTree(t, path)
			tamper(t, p, c.sql...)
			l := *clean
			l.Deliveries = append([]check.Delivery(nil), clean.Deliveries...)
			if c.ledger != nil {
				c.ledger(&l)
			}
			res, err := check.Tree(p, &l, check.Options{Label: "seed 7 tree 3", Budget: c.budget})
			require.NoError(t, err)
			var found *check.Violation
			var all []string
			for i, v := range res.Violations {
				all = append(all, v.String())
				if v.Rule == c.want && strings.Contains(v.Detail, c.detail) && found == nil {
					found = &res.Violations[i]
				}
			}
			require.NotNil(t, found, "want a %s violation with %q, got:\n%s", c.want, c.detail, strings.Join(all, "\n"))
			assert.Equal(t, "seed 7 tree 3", found.Tree)
			assert.Contains(t, found.String(), string(c.want))
			if c.also != "" {
				assert.True(t, slices.ContainsFunc(res.Violations, func(v check.Violation) bool {
					return v.Rule == c.also && strings.Contains(v.Detail, c.alsoDetail)
				}), "want a %s violation with %q too, got:\n%s", c.also, c.alsoDetail, strings.Join(all, "\n"))
			}
		})
	}
}

// withCheckpoint is SQL inserting a text checkpoint of step stepID (as
// SQL) right after the event at seq in session s, moving the later events
// up by one.
func withCheckpoint(seq int64, stepID string) []string {
	return []string{
		fmt.Sprintf(`UPDATE events SET seq = seq + 1000 WHERE session_id = 's' AND seq > %d`, seq),
		`UPDATE events SET seq = seq - 999 WHERE session_id = 's' AND seq > 1000`,
		fmt.Sprintf(`INSERT INTO events (session_id, seq, id, type, at, data, gseq)
			SELECT 's', %[1]d + 1, 'tampered-checkpoint', '%[2]s', at, json_object('step_id', %[3]s, 'offset', 0, 'text', 'Never said '), (SELECT MAX(gseq) + 1 FROM events)
			FROM events WHERE session_id = 's' AND seq = %[1]d`, seq, event.TextCheckpoint, stepID),
	}
}

// insertAfter is SQL inserting an event (its data as SQL) into session's
// log right after the event at seq, moving the later events up by one.
func insertAfter(session string, seq int64, typ event.Type, data string) []string {
	return []string{
		fmt.Sprintf(`UPDATE events SET seq = seq + 1000 WHERE session_id = '%s' AND seq > %d`, session, seq),
		fmt.Sprintf(`UPDATE events SET seq = seq - 999 WHERE session_id = '%s' AND seq > 1000`, session),
		fmt.Sprintf(`INSERT INTO events (session_id, seq, id, type, at, data, gseq)
			SELECT '%[1]s', %[2]d + 1, 'inserted-%[1]s-%[2]d', '%[3]s', at, %[4]s, (SELECT MAX(gseq) + 1 FROM events)
			FROM events WHERE session_id = '%[1]s' AND seq = %[2]d`, session, seq, typ, data),
	}
}

// noticeSeq is the seq of the fixture's first continuation notice in s.
func noticeSeq(t *testing.T, path string) int64 {
	t.Helper()
	return queryInt(t, path, fmt.Sprintf(`SELECT MIN(seq) FROM events WHERE session_id = 's' AND type = '%s' AND json_extract(data, '$.role') = 'notice'`, event.MessageAdded))
}

// queryInt reads one integer from a tree file.
func queryInt(t *testing.T, path, query string) int64 {
	t.Helper()
	var n int64
	queryOne(t, path, query, func(st *sqlite3.Stmt) { n = st.ColumnInt64(0) })
	return n
}

// queryOne runs row on the first row query gives on the tree file at path,
// which must give one.
func queryOne(t *testing.T, path, query string, row func(*sqlite3.Stmt)) {
	t.Helper()
	found := false
	eachRow(t, path, query, func(st *sqlite3.Stmt) {
		if !found {
			row(st)
		}
		found = true
	})
	require.True(t, found, "no row: %s", query)
}

// eachRow runs row on each row query gives on the tree file at path, its
// parameters bound as text from args.
func eachRow(t *testing.T, path, query string, row func(*sqlite3.Stmt), args ...string) {
	t.Helper()
	c, err := sqlite3.Open(path)
	require.NoError(t, err)
	defer c.Close()
	st, _, err := c.Prepare(query)
	require.NoError(t, err, query)
	defer st.Close()
	for i, a := range args {
		require.NoError(t, st.BindText(i+1, a))
	}
	for st.Step() {
		row(st)
	}
	require.NoError(t, st.Err())
}

// Rules names every rule the package defines, each once.
func TestRulesListsEveryRule(t *testing.T) {
	src, err := os.ReadDir(".")
	require.NoError(t, err)
	defined := map[check.Rule]bool{}
	re := regexp.MustCompile(`(?m)^\s*(?:const\s+)?Rule\w+\s+(?:Rule\s+)?=\s+"([a-z-]+)"`)
	for _, f := range src {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(f.Name())
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			defined[check.Rule(m[1])] = true
		}
	}
	listed := map[check.Rule]bool{}
	for _, r := range check.Rules {
		assert.False(t, listed[r], "%s listed twice", r)
		listed[r] = true
	}
	assert.Equal(t, defined, listed)
}
