package check_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// emptied is a copy of the tree at src with every row deleted the way the
// guest's delete does (every table but the tree's epoch and the schema's
// version).
func emptied(t *testing.T, src string) string {
	t.Helper()
	dst := copyTree(t, src)
	var stmts []string
	for _, n := range []string{"blockers", "claims", "events", "jobs", "kv", "messages", "permission_rules", "prompts", "sessions", "steps", "tool_calls"} {
		stmts = append(stmts, `DELETE FROM "`+n+`"`)
	}
	tamper(t, dst, stmts...)
	return dst
}

// deleted is the fixture's ledger for a tree deleted after it: a DELETE
// answered 503 (its transaction failed), then one answered 204 once it
// committed, and a prompt sent after the commit answered 404.
func deleted(l *check.Ledger) *check.Ledger {
	c := *l
	c.Delete = &check.Deletion{
		Attempts: []check.DeleteAttempt{
			{At: 100, Boot: 3, Status: http.StatusServiceUnavailable},
			{At: 200, Boot: 3, Status: http.StatusNoContent, Committed: true},
		},
		Committed: true, CommitAt: 200, CommitBoot: 3, Deliveries: len(l.Deliveries),
		Requests: []check.AfterDelete{
			{At: 150, Route: "POST /v1/sessions/s/prompt", Status: http.StatusAccepted},
			{At: 300, Route: "POST /v1/sessions/s/prompt", AfterCommit: true, Status: http.StatusNotFound},
		},
		Boots: []check.BootAfterDelete{{Boot: 4}},
	}
	return &c
}

func deleteViolations(t *testing.T, before, after string, l *check.Ledger) []string {
	t.Helper()
	res, err := check.DeletedTree(after, before, l, check.Options{Label: "tree"})
	require.NoError(t, err)
	var out []string
	for _, v := range res.Violations {
		out = append(out, v.String())
	}
	return out
}

func TestADeletedTreeThatStaysGoneIsClean(t *testing.T) {
	path, ledger := fixture(t)
	l := deleted(ledger)
	assert.Empty(t, deleteViolations(t, path, emptied(t, path), l))
	// A host that removed the files leaves nothing to hold rows.
	assert.Empty(t, deleteViolations(t, path, filepath.Join(t.TempDir(), "gone.db"), l))
	// A 404 after an earlier attempt's commit (its answer lost) is the
	// client's end too.
	l.Delete.Attempts[1].Status = http.StatusNotFound
	assert.Empty(t, deleteViolations(t, path, emptied(t, path), l))
}

func TestBrokenDeletesAreCaught(t *testing.T) {
	path, ledger := fixture(t)
	empty := emptied(t, path)
	cases := []struct {
		name  string
		after string
		edit  func(l *check.Ledger)
		rule  check.Rule
	}{
		{"rows left", path, func(*check.Ledger) {}, check.RuleDeleteEmpty},
		{"204 before any commit", empty, func(l *check.Ledger) { l.Delete.Attempts[1].Committed = false }, check.RuleDeleteAnswer},
		{"404 while the tree is there", empty, func(l *check.Ledger) {
			l.Delete.Attempts[1].Status, l.Delete.Attempts[1].Committed = http.StatusNotFound, false
		}, check.RuleDeleteAnswer},
		{"never answered 204 or 404", empty, func(l *check.Ledger) { l.Delete.Attempts = l.Delete.Attempts[:1] }, check.RuleDeleteAnswer},
		{"a request after the commit served", empty, func(l *check.Ledger) { l.Delete.Requests[1].Status = http.StatusAccepted }, check.RuleDeleteGone},
		{"a delivery after the commit", empty, func(l *check.Ledger) { l.Delete.Deliveries-- }, check.RuleDeleteGone},
		{"an egress after the commit", empty, func(l *check.Ledger) { l.Delete.Egress = []string{"boot 4: hook"} }, check.RuleDeleteGone},
		{"a boot after the commit finds work", empty, func(l *check.Ledger) { l.Delete.Boots[0].Claims = 1 }, check.RuleDeleteGone},
		{"a wake-up armed after the commit", empty, func(l *check.Ledger) { l.Delete.WakeArms = []string{"boot 4 at 300 (phase sweep): at 1300"} }, check.RuleDeleteGone},
		{"a 204 with the wake-up armed", empty, func(l *check.Ledger) { l.Delete.Attempts[1].WakeArmed = true }, check.RuleDeleteGone},
		{"an emit after the commit", empty, func(l *check.Ledger) {
			l.Emits = &check.Emits{Events: []check.Emitted{{Boot: 4, ID: "x", Session: "s", Seq: 9, Type: "prompt.admitted@1"}}}
		}, check.RuleDeleteGone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := deleted(ledger)
			d := *l.Delete
			d.Attempts = append([]check.DeleteAttempt(nil), d.Attempts...)
			d.Requests = append([]check.AfterDelete(nil), d.Requests...)
			d.Boots = append([]check.BootAfterDelete(nil), d.Boots...)
			l.Delete = &d
			c.edit(l)
			vs := deleteViolations(t, path, c.after, l)
			require.NotEmpty(t, vs)
			res, err := check.DeletedTree(c.after, path, l, check.Options{Label: "tree"})
			require.NoError(t, err)
			for _, v := range res.Violations {
				assert.Equal(t, c.rule, v.Rule, v.String())
			}
		})
	}
}

// cutFixture is a tree cut short as a delete cuts it: a turn stopped in a
// tool body, with a prompt queued behind it, its instance gone.
func cutFixture(t *testing.T) (string, *check.Ledger) {
	t.Helper()
	tr := treetest.New(t)
	rc := &receivers{clock: tr.Clock, gseq: commitPosition(tr), entered: make(chan string, 1), ledger: check.Ledger{Tools: map[string]bool{"hook": false, "ihook": true}}}
	reg, err := tool.NewRegistry(rc.tools()...)
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	n := tr.Boot(r)
	s := n.NewSession("s")
	n.Admit(s, "/tool hook {\"n\":1}\nhello")
	n.Idle()
	rc.setBlocking(true)
	n.Admit(s, "/tool hook {\"n\":2,\"block\":true}\ncut")
	<-rc.entered
	n.Admit(s, "queued")
	n.Crash()
	n.Idle()
	rc.setBlocking(false)
	return written(t, tr, rc)
}

// A cut check (the tree just before its delete) leaves out what holds only
// at quiescence, a turn never ended, and keeps every other rule.
func TestACutCheckJudgesAllButQuiescence(t *testing.T) {
	path, l := cutFixture(t)
	require.NotEmpty(t, violationsOf(t, path, l, check.RuleEnds), "the cut turn has not ended")
	res, err := check.Tree(path, l, check.Options{Label: "tree", Cut: true})
	require.NoError(t, err)
	assert.Empty(t, res.Violations)

	// A non-idempotent call that reached its receiver twice is doubled
	// work, cut or not.
	twice := *l
	twice.Deliveries = append(append([]check.Delivery(nil), l.Deliveries...), l.Deliveries[len(l.Deliveries)-1])
	res, err = check.Tree(path, &twice, check.Options{Label: "tree", Cut: true})
	require.NoError(t, err)
	require.NotEmpty(t, res.Violations)
	for _, v := range res.Violations {
		assert.Equal(t, check.RuleEffects, v.Rule, v.String())
	}
}

// Every table of the tree counts for deleted-tree-empty, not only the
// fixture's whole database: a delete that left one table's rows (the cut
// turn's claim above all, which a later boot would resume) breaks it,
// named by that table. The tree's epoch and the schema's version are the
// bookkeeping a delete keeps.
func TestEachTableLeftHoldingRowsIsCaught(t *testing.T) {
	path, ledger := cutFixture(t)
	tables := tablesHoldingRows(t, path)
	require.Contains(t, tables, "claims", "the cut turn holds its claim")
	for _, keep := range tables {
		t.Run(keep, func(t *testing.T) {
			after := copyTree(t, path)
			var stmts []string
			for _, n := range tables {
				if n != keep {
					stmts = append(stmts, `DELETE FROM "`+n+`"`)
				}
			}
			tamper(t, after, stmts...)
			vs, err := check.DeleteRules(after, deleted(ledger), "tree")
			require.NoError(t, err)
			require.Len(t, vs, 1, "%v", vs)
			assert.Equal(t, check.RuleDeleteEmpty, vs[0].Rule)
			assert.Contains(t, vs[0].Detail, "table "+keep+" ")
		})
	}
}

// tablesHoldingRows lists the tables of the tree at path that hold rows,
// but the tree's epoch and the schema's version.
func tablesHoldingRows(t *testing.T, path string) []string {
	t.Helper()
	c, err := sqlite3.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	s, _, err := c.Prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('tree', 'schema_migrations') ORDER BY name`)
	require.NoError(t, err)
	var names []string
	for s.Step() {
		names = append(names, s.ColumnText(0))
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	var out []string
	for _, n := range names {
		q, _, err := c.Prepare(`SELECT COUNT(*) FROM "` + n + `"`)
		require.NoError(t, err)
		require.True(t, q.Step())
		if q.ColumnInt64(0) > 0 {
			out = append(out, n)
		}
		require.NoError(t, q.Close())
	}
	return out
}
