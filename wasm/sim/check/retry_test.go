package check_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
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

	c, err := sqlite3.Open(tr.Path)
	require.NoError(t, err)
	require.NoError(t, c.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`))
	require.NoError(t, c.Close())
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
