package check_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// flakyModel fails the requests whose numbers (from 1) are in fail with a
// retryable 429 asking for 2 s, marked as the simulator marks its
// failures and recorded in the ledger's hints, and passes the others to
// the offline model.
type flakyModel struct {
	model.Model
	rc   *receivers
	mu   sync.Mutex
	n    int
	fail map[int]bool
}

func (m *flakyModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	m.n++
	fail, n := m.fail[m.n], m.n
	m.mu.Unlock()
	if fail {
		mark := fmt.Sprintf("[failure %d]", n)
		m.rc.mu.Lock()
		m.rc.ledger.Hints = append(m.rc.ledger.Hints, check.Hint{Mark: mark, Answered: m.rc.clock.Now(), Wait: 2000})
		m.rc.mu.Unlock()
		return nil, &model.Error{Status: 429, Retryable: true, RetryAfter: 2 * time.Second, Msg: "slow down " + mark}
	}
	return m.Model.Stream(ctx, req)
}

// retryFixture writes a tree whose provider fails, with a retry budget of
// 2: session r's turn of two steps retries its first step once and its
// second twice (each step counts from 1), session g's turn fails model
// after its step's two retries. Every retry comes due by the wake-up.
func retryFixture(t *testing.T) (string, *check.Ledger) {
	t.Helper()
	tr := treetest.New(t)
	rc := &receivers{clock: tr.Clock, gseq: func() int64 { return 0 }, entered: make(chan string, 1),
		ledger: check.Ledger{Tools: map[string]bool{"hook": false, "ihook": true}, Retry: &check.RetryPolicy{Retries: 2, MaxDelay: 4000}}}
	reg, err := tool.NewRegistry(rc.tools()...)
	require.NoError(t, err)
	m := &flakyModel{Model: offline.New(tr.Clock, offline.Options{}), rc: rc, fail: map[int]bool{1: true, 3: true, 4: true, 6: true, 7: true, 8: true}}
	r, err := runner.New(m, reg, runner.NewConfig().WithRetries(2, time.Second, 4*time.Second))
	require.NoError(t, err)

	n := tr.Boot(r)
	drain := func() {
		for {
			n.Idle()
			at := tr.Wake.At()
			if at == 0 {
				return
			}
			if at > tr.Clock.Now() {
				tr.Clock.Set(at)
			}
			require.True(t, tr.Wake.Take())
			_, err := recovery.Wake(context.Background(), n.Inst)
			require.NoError(t, err)
		}
	}
	n.Admit(n.NewSession("r"), "/tool ihook {\"n\":1}\nhello")
	drain()
	n.Admit(n.NewSession("g"), "bye")
	drain()
	n.Crash()

	checkpointed(t, tr.Path)
	l := rc.ledger
	return tr.Path, &l
}

func TestRetryHistoryHasNoViolations(t *testing.T) {
	path, ledger := retryFixture(t)
	res, err := check.Tree(path, ledger, check.Options{})
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	assert.Equal(t, 5, res.Retries, "1 + 2 retries in r, 2 in g")
	assert.Equal(t, 1, res.RetriesGaveUp)
	assert.Equal(t, 1, res.Ends["succeeded"])
	assert.Equal(t, 1, res.Ends["failed:"+event.FailModel])
}

func TestBrokenRetriesAreCaught(t *testing.T) {
	path, clean := retryFixture(t)
	nth := func(sid string, typ event.Type, cond string, n int) string {
		return fmt.Sprintf(`session_id = '%s' AND seq = (SELECT seq FROM events WHERE session_id = '%s' AND type = '%s' %s ORDER BY seq LIMIT 1 OFFSET %d)`,
			sid, sid, typ, cond, n-1)
	}
	cases := []struct {
		name   string
		sql    []string
		ledger func(l *check.Ledger)
		want   check.Rule
		detail string
	}{
		{name: "retry started before it was due", want: check.RuleRetryNotEarly, detail: "before the retry was due",
			sql: []string{`UPDATE events SET at = at - 1500 WHERE ` + nth("r", event.ExecutionStarted, `AND json_extract(data, '$.cause') = 'retry'`, 1)}},
		{name: "a completed step does not restart the count (the second step's first retry numbered 2)", want: check.RuleRetryBudget, detail: "retry 1 of the step",
			sql: []string{`UPDATE events SET data = json_set(data, '$.attempt', 2) WHERE ` + nth("r", event.RetryScheduled, "", 2)}},
		{name: "retry past the budget", want: check.RuleRetryBudget, detail: "past the budget",
			ledger: func(l *check.Ledger) { l.Retry = &check.RetryPolicy{Retries: 1, MaxDelay: 4000} }},
		{name: "gave up before the budget was spent", want: check.RuleRetryBudget, detail: "before the budget of 3",
			ledger: func(l *check.Ledger) { l.Retry = &check.RetryPolicy{Retries: 3, MaxDelay: 4000} }},
		{name: "retry scheduled before the provider's wait ended", want: check.RuleRetryHint, detail: "1 ms before the wait the provider asked for ended",
			sql: []string{`UPDATE events SET data = json_set(data, '$.at', json_extract(data, '$.at') - 1) WHERE ` + nth("r", event.RetryScheduled, "", 1)}},
		{name: "a sleeping retry resumed as a counted attempt", want: check.RuleRetryNotResumed, detail: "while its retry scheduled at",
			sql: []string{`UPDATE events SET type = '` + string(event.ExecutionResumed) + `', data = json_set(data, '$.attempt', 1) WHERE ` +
				nth("r", event.ExecutionStarted, `AND json_extract(data, '$.cause') = 'retry'`, 1)}},
		{name: "retry scheduled past any allowed wait", want: check.RuleRetryDelay, detail: "longer than any wait",
			sql: []string{`UPDATE events SET data = json_set(data, '$.at', json_extract(data, '$.at') + 3600000) WHERE ` + nth("g", event.RetryScheduled, "", 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := copyTree(t, path)
			tamper(t, p, tc.sql...)
			l := *clean
			if tc.ledger != nil {
				tc.ledger(&l)
			}
			res, err := check.Tree(p, &l, check.Options{})
			require.NoError(t, err)
			var found bool
			for _, v := range res.Violations {
				if v.Rule == tc.want {
					assert.Contains(t, v.Detail, tc.detail)
					found = true
				}
			}
			assert.True(t, found, "want a %s violation, got %v", tc.want, res.Violations)
		})
	}
}

// retryViolations checks the retry fixture's tree at path, tampered by sql,
// against its ledger as changed by ledger (if set), and returns the
// violations of rule.
func retryViolations(t *testing.T, path string, clean *check.Ledger, rule check.Rule, ledger func(l *check.Ledger), sql ...string) []string {
	t.Helper()
	p := copyTree(t, path)
	tamper(t, p, sql...)
	l := *clean
	l.Hints = append([]check.Hint(nil), clean.Hints...)
	if ledger != nil {
		ledger(&l)
	}
	res, err := check.Tree(p, &l, check.Options{})
	require.NoError(t, err)
	var out []string
	for _, v := range res.Violations {
		if v.Rule == rule {
			out = append(out, v.String())
		}
	}
	return out
}

// A retry may sleep the longest wait allowed (the fixture's policy: 4 s),
// not a millisecond more.
func TestRetryDelayIsBoundedAtTheMaximumExactly(t *testing.T) {
	path, clean := retryFixture(t)
	sleep := func(ms int) string {
		return fmt.Sprintf(`UPDATE events SET data = json_set(data, '$.at', at + %d) WHERE session_id = 'g' AND seq = (SELECT MIN(seq) FROM events WHERE session_id = 'g' AND type = '%s')`,
			ms, event.RetryScheduled)
	}
	assert.Empty(t, retryViolations(t, path, clean, check.RuleRetryDelay, nil, sleep(4000)), "the longest wait allowed")
	got := retryViolations(t, path, clean, check.RuleRetryDelay, nil, sleep(4001))
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "4001 ms after it was recorded")
}

// A provider may ask for a wait longer than the cap on Retry-After: the
// retry honours it only up to the cap (MaxDelay), so one scheduled at the
// cap is no early retry.
func TestAProviderWaitPastTheCapIsHonouredUpToTheCap(t *testing.T) {
	path, clean := retryFixture(t)
	capped := func(l *check.Ledger) {
		l.Retry = &check.RetryPolicy{Retries: 2, MaxDelay: 2000} // the fixture's retries wait 2 s
		for i := range l.Hints {
			l.Hints[i].Wait = 3_600_000
		}
	}
	assert.Empty(t, retryViolations(t, path, clean, check.RuleRetryHint, capped))
	assert.Empty(t, retryViolations(t, path, clean, check.RuleRetryDelay, capped), "the twin: 2 s is within the cap")
}

// In a tree whose ledger names no retry policy, a model failure is judged
// by its message: one that says it gave up must have spent the default
// budget (6 retries), and g's gave up after 2.
func TestAGiveUpIsJudgedByItsMessageWithoutARetryPolicy(t *testing.T) {
	path, clean := retryFixture(t)
	got := retryViolations(t, path, clean, check.RuleRetryBudget, func(l *check.Ledger) { l.Retry = nil })
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "after 2 retries of its step, before the budget of 6")
}

// A turn whose retry has started is no longer asleep on it: killed in a
// tool body after that, it is resumed, counted, as any turn, and that is
// no resume of a sleeping turn.
func TestAResumeAfterTheRetryStartedIsClean(t *testing.T) {
	tr := treetest.New(t)
	rc := &receivers{clock: tr.Clock, gseq: func() int64 { return 0 }, entered: make(chan string, 1), blocking: true,
		ledger: check.Ledger{Tools: map[string]bool{"hook": false, "ihook": true}, Retry: &check.RetryPolicy{Retries: 2, MaxDelay: 4000}}}
	reg, err := tool.NewRegistry(rc.tools()...)
	require.NoError(t, err)
	m := &flakyModel{Model: offline.New(tr.Clock, offline.Options{}), rc: rc, fail: map[int]bool{1: true}}
	r, err := runner.New(m, reg, runner.NewConfig().WithRetries(2, time.Second, 4*time.Second))
	require.NoError(t, err)

	n := tr.Boot(r)
	n.Admit(n.NewSession("r"), "/tool ihook {\"n\":1,\"block\":true}\nhello")
	n.Idle() // asleep on its retry
	tr.Clock.Set(tr.Wake.At())
	require.True(t, tr.Wake.Take())
	_, err = recovery.Wake(context.Background(), n.Inst)
	require.NoError(t, err)
	<-rc.entered // the retried step asked for the tool: killed in its body
	n = rc.rebootUnblocked(tr, n, r)
	n.Crash()

	checkpointed(t, tr.Path)
	rc.mu.Lock()
	l := rc.ledger
	rc.mu.Unlock()
	res, err := check.Tree(tr.Path, &l, check.Options{})
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	assert.Equal(t, 1, res.Retries)
	assert.Equal(t, 1, res.Resumes)
	assert.Equal(t, map[string]int{"succeeded": 1}, res.Ends)
}
