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

// start is an execution started in a tree file: its place in the commit
// order, its cause, and that of its session's event just before it.
type start struct {
	gseq, prev int64
	cause      string
}

// starts lists the tree's execution starts (but a session's first event)
// in commit order, and the tree's commit position.
func starts(t *testing.T, path string) ([]start, int64) {
	t.Helper()
	var out []start
	eachRow(t, path, `SELECT e.gseq, p.gseq, e.data ->> '$.cause' FROM events e
		JOIN events p ON p.session_id = e.session_id AND p.seq = e.seq - 1
		WHERE e.type = ? ORDER BY e.gseq`, func(st *sqlite3.Stmt) {
		out = append(out, start{gseq: st.ColumnInt64(0), prev: st.ColumnInt64(1), cause: st.ColumnText(2)})
	}, string(event.ExecutionStarted))
	return out, queryInt(t, path, `SELECT MAX(gseq) FROM events`)
}

// firstStart is the first start of cause in ss whose session event before
// it is an earlier commit.
func firstStart(t *testing.T, ss []start, cause string) start {
	t.Helper()
	for _, s := range ss {
		if s.cause == cause && s.prev < s.gseq {
			return s
		}
	}
	require.Failf(t, "no start", "of cause %s in %+v", cause, ss)
	return start{}
}

// startsHereViolations judges the tree at path with ledger l, its commits
// attributed as given, and the wake-up delivered as given.
func startsHereViolations(t *testing.T, path string, l check.Ledger, commits []check.Commit, wakes ...check.Wake) []string {
	t.Helper()
	l.Emits = nil
	if commits != nil {
		l.Emits = &check.Emits{From: map[int]int64{1: 0, 2: 0}, Commits: commits}
	}
	l.Wakes = wakes
	return violationsOf(t, path, &l, check.RuleStartsHere)
}

// An execution the wake handler started, for a claim the instance serving
// it took before the delivery (its session's last event, committed by
// that instance with storage taking every write since), waited for the
// wake-up: that is the rule. The same start after a storage fault, after
// a boot since the claim, after an event the delivery wrote itself, or
// with no delivery around it, is the wake-up's to make.
func TestAStartTheWakeUpMadeForAClaimTakenHereIsCaught(t *testing.T) {
	path, clean := fixture(t)
	ss, last := starts(t, path)
	s := firstStart(t, ss, event.CausePrompt)
	one := []check.Commit{{Boot: 1, From: 0, To: last}}
	late := check.Wake{At: 5000, Boot: 1, From: s.gseq - 1, To: s.gseq}

	vs := startsHereViolations(t, path, *clean, one, late)
	require.Len(t, vs, 1, "the start the wake-up made: %s", strings.Join(vs, "\n"))
	assert.Contains(t, vs[0], "the claim waited for the wake-up")
	wide := late
	wide.From, wide.To = s.prev, last
	assert.NotEmpty(t, startsHereViolations(t, path, *clean, one, wide), "a delivery that committed more than the start")

	refused := late
	refused.Refused = 1
	assert.Empty(t, startsHereViolations(t, path, *clean, one, refused), "storage refused a write before the delivery")
	assert.NotEmpty(t, startsHereViolations(t, path, *clean, []check.Commit{{Boot: 1, From: 0, To: last, Refused: 1}}, refused),
		"the refusal came before the claim's own transaction")
	refused.Waiting = true
	assert.Empty(t, startsHereViolations(t, path, *clean, one, refused), "refused, with a timer set")

	// A commit reported failed though durable delays its own writer until
	// its rerun, a timer: it excuses the start only while one is set.
	reported := late
	reported.Late = 1
	assert.NotEmpty(t, startsHereViolations(t, path, *clean, one, reported), "every writer has gone on: no timer set")
	reported.Waiting = true
	assert.Empty(t, startsHereViolations(t, path, *clean, one, reported), "a writer may be waiting for its rerun")
	assert.NotEmpty(t, startsHereViolations(t, path, *clean, []check.Commit{{Boot: 1, From: 0, To: last, Late: 1}}, reported),
		"the late commit came before the claim's own transaction (the record whose wait the claim was taken in)")
	// The claim's own commit reported failed: a read-only instance's
	// Admit tries once and fails, leaving the claim to the wake-up.
	own := []check.Commit{{Boot: 1, From: 0, To: s.prev - 1}, {Boot: 1, From: s.prev - 1, To: s.prev, Failed: true}, {Boot: 1, From: s.prev, To: last, Late: 1}}
	reported.Waiting = false
	assert.Empty(t, startsHereViolations(t, path, *clean, own, reported), "the claim's own commit was reported failed")
	own[1].Failed = false
	assert.NotEmpty(t, startsHereViolations(t, path, *clean, own, reported), "the claim's own commit was not reported failed")

	rebooted := late
	rebooted.Boot = 2
	assert.Empty(t, startsHereViolations(t, path, *clean,
		[]check.Commit{{Boot: 1, From: 0, To: s.prev}, {Boot: 2, From: s.prev, To: last}}, rebooted), "a boot since the claim")
	assert.Empty(t, startsHereViolations(t, path, *clean,
		[]check.Commit{{Boot: 1, From: 0, To: s.gseq - 1}, {Boot: 2, From: s.gseq - 1, To: last}}, late), "the start is another instance's")

	within := late
	within.From = s.prev - 1
	assert.Empty(t, startsHereViolations(t, path, *clean, one, within), "the event before the start is the delivery's own")
	assert.Empty(t, startsHereViolations(t, path, *clean, one, check.Wake{At: 5000, Boot: 1, From: s.gseq, To: last}), "delivered after the start")
	assert.Empty(t, startsHereViolations(t, path, *clean, nil, late), "no attribution of commits: not judged")
	assert.Empty(t, startsHereViolations(t, path, *clean, one), "no delivery")
}

// A claim asleep on a scheduled retry waits for the wake-up by design:
// every retry of the retry fixture is started by it, and only a start of
// another cause in the same place is caught.
func TestARetryTheWakeUpStartsIsClean(t *testing.T) {
	path, clean := retryFixture(t)
	ss, last := starts(t, path)
	one := []check.Commit{{Boot: 1, From: 0, To: last}}
	var wakes []check.Wake
	for _, s := range ss {
		if s.cause == event.CauseRetry {
			wakes = append(wakes, check.Wake{At: 1, Boot: 1, From: s.gseq - 1, To: s.gseq})
		}
	}
	require.Len(t, wakes, 5)
	assert.Empty(t, startsHereViolations(t, path, *clean, one, wakes...))

	s := firstStart(t, ss, event.CausePrompt)
	vs := startsHereViolations(t, path, *clean, one, append(wakes, check.Wake{At: 1, Boot: 1, From: s.gseq - 1, To: s.gseq})...)
	assert.Len(t, vs, 1, strings.Join(vs, "\n"))
}

// A prompt admitted behind a claim already there (taken by an earlier
// admission whose start storage refused, which the wake-up retries)
// takes no claim and starts nothing: the start is judged from the
// admission that took the claim, before the fault, not from the later
// one (seed 2 session 5 of -diskfull 1).
func TestAnAdmissionBehindAClaimStartsNothing(t *testing.T) {
	path, clean := fixture(t)
	ss, _ := starts(t, path)
	s := firstStart(t, ss, event.CausePrompt)
	admitted := queryInt(t, path, fmt.Sprintf(`SELECT seq FROM events WHERE gseq = %d`, s.prev))
	tamper(t, path, append(insertAfter("s", admitted, event.PromptAdmitted, `json_object('prompt_id', 'queued', 'client_id', 'q', 'text', 'queued', 'mode', 'queue')`),
		fmt.Sprintf(`UPDATE events SET gseq = -(gseq + 1) WHERE gseq >= %d AND id NOT LIKE 'inserted-%%'`, s.gseq),
		`UPDATE events SET gseq = -gseq WHERE gseq < 0`,
		fmt.Sprintf(`UPDATE events SET gseq = %d WHERE id LIKE 'inserted-%%'`, s.gseq))...)
	ss, last := starts(t, path)
	require.Equal(t, s.gseq+1, firstStart(t, ss, event.CausePrompt).gseq, "the queued admission is committed between the claim's and the start")

	refused := []check.Commit{{Boot: 1, From: 0, To: s.prev}, {Boot: 1, From: s.prev, To: last, Refused: 1}}
	wake := check.Wake{At: 5000, Boot: 1, From: s.gseq, To: s.gseq + 1, Refused: 1}
	assert.Empty(t, startsHereViolations(t, path, *clean, refused, wake), "the claim's start met the refusal")

	wake.Refused = 0
	vs := startsHereViolations(t, path, *clean, []check.Commit{{Boot: 1, From: 0, To: last}}, wake)
	require.Len(t, vs, 1, strings.Join(vs, "\n"))
	assert.Contains(t, vs[0], fmt.Sprintf("session.prompt.admitted@1 #%d (gseq %d)", admitted, s.prev), "judged from the claim's admission")
}
