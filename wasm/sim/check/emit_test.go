package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// logged is every stored event of a tree file as emit would carry it, in
// commit order (gseq), emitted by boot 1.
func logged(t *testing.T, path string) []check.Emitted {
	t.Helper()
	c, err := sqlite3.Open(path)
	require.NoError(t, err)
	defer c.Close()
	st, _, err := c.Prepare(`SELECT id, session_id, seq, type FROM events ORDER BY gseq`)
	require.NoError(t, err)
	defer st.Close()
	var out []check.Emitted
	for st.Step() {
		out = append(out, check.Emitted{Boot: 1, ID: st.ColumnText(0), Session: st.ColumnText(1), Seq: st.ColumnInt64(2), Type: st.ColumnText(3)})
	}
	require.NoError(t, st.Err())
	require.Greater(t, len(out), 4)
	return out
}

// emitsWithout is the fixture's log emitted by one instance, but for the
// events at the given indexes (in commit order): the lost emits a guest
// that misses a late IOERR's events leaves.
func emitsWithout(t *testing.T, path string, skip ...int) *check.Emits {
	t.Helper()
	var evs []check.Emitted
	for i, e := range logged(t, path) {
		if !slices.Contains(skip, i) {
			evs = append(evs, e)
		}
	}
	return &check.Emits{From: map[int]int64{1: 0}, Events: evs}
}

// emitViolations checks the tree at path with the fixture's ledger l and
// the given emits.
func emitViolations(t *testing.T, path string, l check.Ledger, emits *check.Emits) []string {
	t.Helper()
	l.Emits = emits
	res, err := check.Tree(path, &l, check.Options{Label: "emits"})
	require.NoError(t, err)
	var out []string
	for _, v := range res.Violations {
		out = append(out, v.String())
	}
	return out
}

// Emits that keep the promise pass: every event once, in commit order; and
// an instance that died between commits and their emits may leave its last
// events unemitted (the host catches up from the log), its successor
// starting after them.
func TestEmitsThatKeepThePromise(t *testing.T) {
	path, clean := fixture(t)
	all := logged(t, path)
	assert.Empty(t, emitViolations(t, path, *clean, &check.Emits{From: map[int]int64{1: 0}, Events: all}))

	n := len(all)
	died := &check.Emits{From: map[int]int64{1: 0, 2: int64(n - 2)}}
	died.Events = append(died.Events, all[:n-4]...)
	for _, e := range all[n-2:] {
		e.Boot = 2
		died.Events = append(died.Events, e)
	}
	assert.Empty(t, emitViolations(t, path, *clean, died), "boot 1 died before emitting its last two events")
	assert.Empty(t, emitViolations(t, path, *clean, nil), "no record, no check")
}

// Emits that break the promise in each way a guest could.
func TestBrokenEmitsAreCaught(t *testing.T) {
	path, clean := fixture(t)
	all := logged(t, path)
	with := func(f func(evs []check.Emitted) []check.Emitted) *check.Emits {
		return &check.Emits{From: map[int]int64{1: 0}, Events: f(append([]check.Emitted(nil), all...))}
	}
	cases := []struct {
		name   string
		emits  *check.Emits
		detail string
	}{
		{"lost", emitsWithout(t, path, 3), "never reached emit"},
		{"lost before the instance's first emit", &check.Emits{From: map[int]int64{1: 0}, Events: all[1:]}, "never reached emit"},
		{"twice", with(func(evs []check.Emitted) []check.Emitted { return append(evs, evs[2]) }), "emitted twice"},
		{"out of commit order", with(func(evs []check.Emitted) []check.Emitted { evs[2], evs[3] = evs[3], evs[2]; return evs }), "not in commit order"},
		{"not stored", with(func(evs []check.Emitted) []check.Emitted {
			return append(evs, check.Emitted{Boot: 1, ID: "ghost", Session: "s", Seq: 99, Type: string(event.MessageAdded)})
		}), "not in the log"},
		{"under another seq", with(func(evs []check.Emitted) []check.Emitted { evs[2].Seq += 5; return evs }), "emitted id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := emitViolations(t, path, *clean, c.emits)
			found := false
			for _, v := range vs {
				found = found || (strings.HasPrefix(v, string(check.RuleEmits)) && strings.Contains(v, c.detail))
			}
			assert.True(t, found, "want a %s violation with %q, got:\n%s", check.RuleEmits, c.detail, strings.Join(vs, "\n"))
		})
	}
}

// A superseded instance whose COMMIT was reported failed but was durable (a
// late IOERR) emits those events only at the start of its next
// transaction; closed before one (a zombie retired once idle), it never
// does. Its successor, started before that commit, owes none of them: the
// commits' attribution says whose they are (seed 2, session 168, of the
// default campaign). Without it the event counts as the successor's.
func TestAZombiesUnsettledCommitIsNotItsSuccessorsToEmit(t *testing.T) {
	path, clean := fixture(t)
	all := logged(t, path)
	n := int64(len(all))
	const k = 3 // boot 1 emitted gseq 1…3, then committed gseq 4 reported failed, and was closed
	emits := func(commits []check.Commit) *check.Emits {
		e := &check.Emits{From: map[int]int64{1: 0, 2: k}, Commits: commits}
		e.Events = append(e.Events, all[:k]...)
		for _, ev := range all[k+1:] {
			ev.Boot = 2
			e.Events = append(e.Events, ev)
		}
		return e
	}
	zombies := []check.Commit{{Boot: 1, From: 0, To: k + 1}, {Boot: 2, From: k + 1, To: n}}
	assert.Empty(t, emitViolations(t, path, *clean, emits(zombies)), "gseq %d is boot 1's, which never ran another transaction", k+1)

	successors := []check.Commit{{Boot: 1, From: 0, To: k}, {Boot: 2, From: k, To: n}}
	for name, e := range map[string]*check.Emits{"committed by the successor": emits(successors), "no attribution": emits(nil)} {
		vs := emitViolations(t, path, *clean, e)
		require.Len(t, vs, 1, name)
		assert.Contains(t, vs[0], "never reached emit", name)
	}
}
