package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// The kill budget is spread over the sessions to the last kill: the
// shares add up to it and differ by one at most.
func TestKillBudgetIsSpreadWhole(t *testing.T) {
	for _, c := range []struct{ kills, sessions int }{{7, 3}, {100, 10}, {2, 5}, {0, 4}, {2101, 200}} {
		cfg := Config{Kills: c.kills, Sessions: c.sessions}
		sum, least, most := 0, c.kills, 0
		for i := range c.sessions {
			n := cfg.killsFor(i)
			sum += n
			least, most = min(least, n), max(most, n)
		}
		assert.Equal(t, c.kills, sum, "%d kills over %d sessions", c.kills, c.sessions)
		assert.LessOrEqual(t, most-least, 1, "%d kills over %d sessions", c.kills, c.sessions)
	}
}

// A share outside 0…1, a negative count, or a share of trees the campaign
// has none of is refused before anything runs.
func TestConfigOutOfRangeIsRefused(t *testing.T) {
	ok := Config{Sessions: 1}
	require.NoError(t, ok.Validate())
	for name, mut := range map[string]func(*Config){
		"sessions":        func(c *Config) { c.Sessions = 0 },
		"kills":           func(c *Config) { c.Kills = -1 },
		"zombies above":   func(c *Config) { c.Zombies = 1.5 },
		"zombies below":   func(c *Config) { c.Zombies = -0.1 },
		"diskfull above":  func(c *Config) { c.DiskFull = 1.01 },
		"diskfull below":  func(c *Config) { c.DiskFull = -1 },
		"scripted above":  func(c *Config) { c.Scripted = 2 },
		"small above":     func(c *Config) { c.SmallBudget = 1.1 },
		"final below":     func(c *Config) { c.FinalAsk = -0.5 },
		"bootfault above": func(c *Config) { c.BootFault = 1.5 },
		"bootlock below":  func(c *Config) { c.BootLock = -0.1 },
		"negative budget": func(c *Config) { c.ResumeBudget = -1 },
		"delfault above":  func(c *Config) { c.Deletes, c.DeleteFault = 1, 1.5 },
		"flood below":     func(c *Config) { c.Scripted, c.Flood = 1, -0.1 },
		"stops above":     func(c *Config) { c.Stops = 1.5 },
		// A share of no trees would run a campaign that reaches nothing
		// and reports it as a share: only a deleted tree's delete fails,
		// only a scripted tree's prompt floods.
		"delfault without deletes": func(c *Config) { c.DeleteFault = 0.5 },
		"flood without scripted":   func(c *Config) { c.Flood = 0.5 },
	} {
		c := ok
		mut(&c)
		assert.Error(t, c.Validate(), name)
	}
}

// The small-budget share runs with budgets of 1 and of 2, both.
func TestSmallBudgetsAreOneAndTwo(t *testing.T) {
	cfg := DefaultConfig(1)
	got := map[int]int{}
	for i := range cfg.Sessions {
		got[cfg.budgetFor(i)]++
	}
	assert.Positive(t, got[1], "budget 1: %v", got)
	assert.Positive(t, got[2], "budget 2: %v", got)
}

// Every per-tree draw follows the campaign's seed: another seed gives
// another resume budget, model, retry budget, workload and clients, so a
// campaign's seeds explore different histories (and a failing one is
// found again from its seed alone: TestSameSeedSameHistory).
func TestSeedDrivesEveryDraw(t *testing.T) {
	draws := func(seed uint64) (budgets, scripted, retries, work, asks string) {
		cfg := DefaultConfig(seed)
		cfg.DiskFull = 0
		var b, s, r, w, a strings.Builder
		for i := range 64 {
			fmt.Fprint(&b, cfg.budgetFor(i), " ")
			fmt.Fprint(&s, cfg.scriptedFor(i), " ")
			fmt.Fprint(&r, cfg.retriesFor(i), " ")
			tr := newTree(nil, cfg, i, t.TempDir())
			for _, act := range tr.actions {
				fmt.Fprintf(&w, "%d %d %q|", act.at, act.kind, act.text)
			}
			fmt.Fprint(&a, tr.ask.rng.Uint64(), tr.quiet.rng.Uint64(), tr.echoes.Uint64(), " ")
		}
		return b.String(), s.String(), r.String(), w.String(), a.String()
	}
	b1, s1, r1, w1, a1 := draws(1)
	b1b, s1b, r1b, w1b, a1b := draws(1)
	assert.Equal(t, []string{b1, s1, r1, w1, a1}, []string{b1b, s1b, r1b, w1b, a1b}, "a seed repeats")
	b2, s2, r2, w2, a2 := draws(2)
	assert.NotEqual(t, b1, b2, "resume budgets")
	assert.NotEqual(t, s1, s2, "the scripted model's trees")
	assert.NotEqual(t, r1, r2, "retry budgets")
	assert.NotEqual(t, w1, w2, "workloads")
	assert.NotEqual(t, a1, a2, "clients")
}

// Progress prints its last line when the last session ends, whether or
// not it falls on a tenth, and counts sessions that failed to run as
// violations.
func TestProgressLastLineAndFailures(t *testing.T) {
	var out bytes.Buffer
	cfg := Config{Seed: 4, Sessions: 25, Progress: &out, ProgressEvery: time.Hour}
	p := newProgress(cfg, time.Now())
	for i := range cfg.Sessions {
		r := SessionResult{Index: i, Kills: 1}
		if i == 3 {
			r.Failures = []string{"no quiescence"}
			r.Check.Violations = []check.Violation{{Rule: "x"}}
		}
		p.done(&r)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 13, "every second session (a tenth of 25 is 2), and the last: %s", out.String())
	assert.Contains(t, lines[12], "seed 4: 25/25 sessions, 25 kills, 2 violations so far")
}

// A kind of site no kill hit is reported: a phase, a side, an import.
func TestUncoveredNamesWhatNoKillHit(t *testing.T) {
	h := Histogram{
		{Import: "sql_exec", Phase: runtime.PhaseBoot}:               {Seen: 3, Kills: 1},
		{Import: "sql_exec", Phase: runtime.PhaseServe}:              {Seen: 3, Kills: 1},
		{Import: "emit", Phase: runtime.PhaseSweep}:                  {Seen: 3, Kills: 1},
		{Import: "respond", Phase: runtime.PhaseServe}:               {Seen: 9},
		{Import: "respond", Phase: runtime.PhaseSweep}:               {Seen: 1},
		{Import: "emit", Phase: runtime.PhaseServe}:                  {Seen: 1},
		{Import: "sql_exec", Phase: runtime.PhaseSweep}:              {Seen: 1},
		{Import: "sql_exec", Phase: runtime.PhaseServe, After: true}: {Seen: 1},
	}
	assert.Equal(t, []string{"import respond", "after"}, h.Uncovered())
	h[SiteKey{Import: "respond", Phase: runtime.PhaseServe, After: true}] = SiteCount{Seen: 1, Kills: 1}
	assert.Empty(t, h.Uncovered())
	delete(h, SiteKey{Import: "emit", Phase: runtime.PhaseSweep})
	assert.Equal(t, []string{"import emit", "phase sweep"}, h.Uncovered())

	sum := Histogram{}
	sum.add(h)
	sum.add(h)
	assert.Equal(t, 2*h.Kills(), sum.Kills(), "campaign totals add the sessions'")
}

// The history hash covers every field of every event and the ledger: a
// replay that differs in any of them differs in its hash.
func TestHistoryHashCoversEventsAndLedger(t *testing.T) {
	db := func(data string) string {
		path := filepath.Join(t.TempDir(), "tree.db")
		c, err := openConn(path, "")
		require.NoError(t, err)
		defer c.close()
		for _, q := range []string{`CREATE TABLE events (session_id TEXT, seq INTEGER, id TEXT, type TEXT, at INTEGER, data TEXT, gseq INTEGER)`,
			`INSERT INTO events VALUES ('s', 1, 'e1', 'session.created@1', 5, '{}', 1)`,
			fmt.Sprintf(`INSERT INTO events VALUES ('s', 2, 'e2', 'session.prompt.admitted@1', 6, '%s', 2)`, data)} {
			_, err := c.Exec(q, nil)
			require.NoError(t, err, q)
		}
		return path
	}
	a, b := db(`{"text":"hello"}`), db(`{"text":"hullo"}`)
	l := &check.Ledger{Accepted: []string{"p1"}}
	ha, err := historyHash(a, l)
	require.NoError(t, err)
	again, err := historyHash(a, &check.Ledger{Accepted: []string{"p1"}})
	require.NoError(t, err)
	assert.Equal(t, ha, again, "the same history")
	hb, err := historyHash(b, l)
	require.NoError(t, err)
	assert.NotEqual(t, ha, hb, "events whose data differ")
	hl, err := historyHash(a, &check.Ledger{Accepted: []string{"p2"}})
	require.NoError(t, err)
	assert.NotEqual(t, ha, hl, "ledgers that differ")

	// What only explains the log, or what the guest's threads did between
	// its events, is not hashed: histories hashed before it was recorded
	// still compare.
	bare := &check.Ledger{Emits: &check.Emits{From: map[int]int64{1: 0}}}
	told := &check.Ledger{Emits: &check.Emits{From: map[int]int64{1: 0}, Commits: []check.Commit{{Boot: 1, To: 2}},
		Deltas: []check.Delta{{Boot: 1, Session: "s", Step: "st"}}, Settled: map[int]int64{1: 2}}}
	hbare, err := historyHash(a, bare)
	require.NoError(t, err)
	htold, err := historyHash(a, told)
	require.NoError(t, err)
	assert.Equal(t, hbare, htold, "commits, deltas and quiet points")
}

// The summary lists the violations, by rule and one a line (the first
// twenty), and ends with their count, a simulation's failures included.
func TestPrintListsEveryViolation(t *testing.T) {
	one := &Result{Config: Config{Seed: 9}, Hist: Histogram{}, Violations: []check.Violation{{Tree: "seed 9 session 0", Rule: RuleSimulation, Detail: "no guest booted"}}}
	var out bytes.Buffer
	one.Print(&out)
	assert.Contains(t, out.String(), "violations by rule: simulation 1\n")
	assert.Contains(t, out.String(), "  simulation: seed 9 session 0")
	assert.Contains(t, out.String(), "no guest booted")
	assert.True(t, strings.HasSuffix(out.String(), "violations: 1\n"), out.String())

	many := &Result{Hist: Histogram{}}
	for i := range 25 {
		many.Violations = append(many.Violations, check.Violation{Tree: fmt.Sprintf("t%d", i), Rule: check.RuleWakeArmed, Detail: fmt.Sprintf("detail %d", i)})
	}
	out.Reset()
	many.Print(&out)
	assert.Contains(t, out.String(), fmt.Sprintf("violations by rule: %s 25\n", check.RuleWakeArmed))
	assert.Contains(t, out.String(), "detail 19")
	assert.NotContains(t, out.String(), "detail 20")
	assert.Contains(t, out.String(), "… and 5 more\n")
	assert.True(t, strings.HasSuffix(out.String(), "violations: 25\n"), out.String())
}

// A stuck window's user interrupts the turn stuck on the full disk once a
// write failed in it: 30.5, 34 and 40.5 s later, each while the window
// (and the interrupt's grace after it) lasts; a write failed outside every
// stuck window sends nothing.
func TestStuckWindowIsInterrupted(t *testing.T) {
	tr := &tree{now: start + 1_000}
	tr.fault = faultvfs.New(func() int64 { return tr.now })
	vfs := "sim-stuck-" + t.Name()
	faultvfs.Register(vfs, tr.fault)
	t.Cleanup(func() { faultvfs.Unregister(vfs) })
	c, err := openConn(filepath.Join(t.TempDir(), "tree.db"), vfs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.close() })
	_, err = c.Exec(`CREATE TABLE x (v INTEGER)`, nil)
	require.NoError(t, err)
	write := func() {
		_, err := c.Exec(`INSERT INTO x VALUES (1)`, nil)
		require.Error(t, err, "the disk is full")
	}
	// Two windows: a stuck one from 2 s to 38 s, a plain one from 50 s.
	tr.fault.FailBetween(start+2_000, start+38_000, faultvfs.Full)
	tr.fault.FailBetween(start+50_000, start+60_000, faultvfs.Full)
	tr.stuck = []stuckWindow{{from: start + 2_000, until: start + 38_000}}

	tr.watchStuck()
	assert.Empty(t, tr.actions, "no write failed yet")
	tr.now = start + 3_000
	write()
	tr.watchStuck()
	var at []int64
	for _, a := range tr.actions {
		require.Equal(t, actInterrupt, a.kind)
		at = append(at, a.at-tr.now)
	}
	assert.Equal(t, []int64{30_500, 34_000}, at, "40.5 s later is past the window's end and grace")

	tr.now = start + 4_000
	write()
	tr.watchStuck()
	assert.Len(t, tr.actions, 2, "a window is interrupted once")
	tr.now = start + 55_000
	write()
	tr.watchStuck()
	assert.Len(t, tr.actions, 2, "a plain window's failure interrupts nothing")
}

// A client that approves a permission request "always" calls the tool
// again a while later (afterAlways), once per reply even when the reply is
// sent twice, so the tree's saved rule is put to use (check.RuleAlways).
func TestAlwaysReplyIsFollowedByTheToolAgain(t *testing.T) {
	tr := newTree(nil, Config{Seed: 3, Sessions: 1}, 0, t.TempDir())
	tr.actions = nil
	always := 0
	for i := range 60 {
		r := tr.newReply(listed{ID: fmt.Sprintf("p-%d", i)}, false, "")
		var body struct{ Reply string }
		require.NoError(t, json.Unmarshal(r.body, &body))
		if body.Reply == "always" {
			always++
		}
		tr.addReply(start, r)
		again := *r
		tr.addReply(start+10, &again)
	}
	require.Positive(t, always, "some approvals are always")
	followUps := 0
	for _, a := range tr.actions {
		if a.kind == actPrompt {
			followUps++
			assert.Contains(t, a.text, "/tool "+toolAHook+" ")
			assert.Contains(t, a.text, `"again":true`)
			assert.GreaterOrEqual(t, a.at, start+4_000)
		}
	}
	assert.Equal(t, always, followUps, "one call of the tool again per always reply")
}

// A zombie's ClearWake goes nowhere: the tree's wake-up is the serving
// guest's, and a zombie clearing it would strand the claims it covers.
func TestZombieCannotClearTheWakeUp(t *testing.T) {
	tr := &tree{wake: start + 5_000}
	z := &guest{t: tr, zombie: true}
	z.ClearWake()
	assert.Equal(t, start+5_000, tr.wake)
	g := &guest{t: tr}
	g.ClearWake()
	assert.Zero(t, tr.wake, "the serving guest clears it")
}

// The host's moments: after a commit with no wake-up armed (and none
// being delivered), each claimed session is a claim left without one,
// reported once per tree; a wake-up armed more than a wake interval ahead
// of a claim that does not sleep is late; at quiescence every claim is
// stranded. Trees whose disk fails now are not judged on the wake-up's
// due time (wakeDueExcused).
func TestMomentsReportClaimsWithoutAWakeUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tree.db")
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	require.NoError(t, schema.Migrate(context.Background(), db, 1))
	for _, q := range []string{`INSERT INTO claims (session_id, claimed_at) VALUES ('s1', 1)`, `INSERT INTO claims (session_id, claimed_at) VALUES ('s2', 1)`} {
		_, err := db.Conn().Exec(q, nil)
		require.NoError(t, err, q)
	}
	require.NoError(t, db.Close())
	tr := &tree{path: path, created: true, now: start}
	t.Cleanup(tr.closeProbe)
	g := &guest{t: tr, boot: 3}
	rules := func() (out []string) {
		for _, o := range tr.ledger.Observed {
			out = append(out, fmt.Sprintf("%s %s %d", o.Rule, o.Session, o.Boot))
		}
		return out
	}

	tr.delivering = true
	tr.checkCommit(g)
	assert.Empty(t, tr.ledger.Observed, "the wake-up being delivered still counts as armed")
	tr.delivering = false
	tr.checkCommit(g)
	tr.checkCommit(g)
	want := []string{fmt.Sprintf("%s s1 3", check.RuleWakeArmed), fmt.Sprintf("%s s2 3", check.RuleWakeArmed)}
	assert.Equal(t, want, rules(), "one observation per session, once")

	tr.wake = start + 5_000
	tr.checkWakeDue(g)
	assert.Len(t, tr.ledger.Observed, 2, "due within the wake interval")
	tr.fault = faultvfs.New(func() int64 { return tr.now })
	tr.fault.FailBetween(start, start+1_000, faultvfs.Full)
	tr.wake = start + 60_000
	tr.checkWakeDue(g)
	assert.Len(t, tr.ledger.Observed, 2, "a tree whose disk fails now is judged on it")
	tr.fault = nil
	tr.checkWakeDue(g)
	want = append(want, fmt.Sprintf("%s s1 3", check.RuleWakeDue), fmt.Sprintf("%s s2 3", check.RuleWakeDue))
	assert.Equal(t, want, rules())

	tr.checkStranded()
	assert.Len(t, tr.ledger.Observed, 6, "stranded at quiescence, a detail of its own")
}

// The campaign's result holds every session's violations and the failures
// of its simulation, in session order, the kill sites added up, and a hash
// of the sessions' hashes in order.
func TestGatherKeepsEveryViolation(t *testing.T) {
	cfg := Config{Seed: 6, Sessions: 3}
	results := []SessionResult{
		{Index: 0, Hash: [32]byte{1}, Hist: Histogram{{Import: "emit"}: {Seen: 2, Kills: 1}}},
		{Index: 1, Hash: [32]byte{2}, Check: check.Result{Violations: []check.Violation{{Tree: "seed 6 session 1", Rule: check.RuleEffects, Detail: "twice"}}},
			Failures: []string{"no quiescence"}, Hist: Histogram{{Import: "emit"}: {Seen: 1, Kills: 2}}},
		{Index: 2, Hash: [32]byte{3}, Check: check.Result{Violations: []check.Violation{{Tree: "seed 6 session 2", Rule: check.RuleWakeArmed}}}},
	}
	res := gather(cfg, results)
	assert.Equal(t, []check.Violation{
		{Tree: "seed 6 session 1", Rule: check.RuleEffects, Detail: "twice"},
		{Tree: "seed 6 session 1", Rule: RuleSimulation, Detail: "no quiescence"},
		{Tree: "seed 6 session 2", Rule: check.RuleWakeArmed},
	}, res.Violations)
	assert.Equal(t, 3, res.Hist.Kills())
	results[0].Hash, results[2].Hash = results[2].Hash, results[0].Hash
	assert.NotEqual(t, res.Hash, gather(cfg, results).Hash, "the sessions' order is hashed")
}
