package recovery_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// stopDriver ends every execution at once without writing, as if it died
// the moment it started: its claim keeps the execution id, so the next
// sweep resumes it again.
var stopDriver = core.DriverFunc(func(context.Context, *core.Execution) core.Outcome {
	return core.Outcome{Kind: core.Stopped}
})

// sweepTree is one database file holding claimed sessions whose executions
// died, with the host parts every instance over it shares.
type sweepTree struct {
	db   *sqlitedb.DB
	host core.Host
	cfg  core.Config
}

// newSweepTree creates n sessions, each with an admitted prompt whose
// execution started (the execution id is on the claim) and then died.
func newSweepTree(b *testing.B, dir string, n int) *sweepTree {
	b.Helper()
	db, err := sqlitedb.Open(filepath.Join(dir, fmt.Sprintf("claimed-%d.db", n)), sqlitedb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	st := &sweepTree{
		db: db,
		host: core.Host{DB: db, Clock: fakehost.NewClock(treetest.Start), Wake: &fakehost.Waker{},
			IDs: &fakehost.IDs{Prefix: "id"}}, // shared: ids stay unique across instances
		// Every op resumes every claim once more; never run out of budget.
		cfg: core.NewConfig().WithResumeBudget(1 << 30),
	}
	inst, err := core.Open(ctx, st.host, st.cfg, stopDriver)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		s, err := inst.CreateSession(ctx, core.NewSession{ID: fmt.Sprintf("s%04d", i), Principal: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inst.Admit(ctx, s.ID, core.PromptInput{Text: "work"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := inst.WaitIdle(ctx); err != nil {
		b.Fatal(err)
	}
	inst.Abandon()
	claims, err := inst.Claims(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range claims {
		if c.ExecutionID == "" {
			b.Fatalf("session %s: claim without a started execution", c.SessionID)
		}
	}
	if len(claims) != n {
		b.Fatalf("%d claims, want %d", len(claims), n)
	}
	return st
}

// BenchmarkSweep measures a boot's sweep over a database holding N claimed
// sessions whose executions died (sessions in one database, as an embedder
// may hold them). Each op opens a fresh instance over the file (a new epoch,
// not timed), then times recovery.Sweep deciding and resuming every claim
// (count the attempt, notice, start: one transaction each) until all the
// resumed executions have ended.
func BenchmarkSweep(b *testing.B) {
	parent, dir := b, b.TempDir()
	// Built once per size and reused by every round the benchmark runs (a
	// sub-benchmark's own cleanups run after each round, so the parent
	// closes them).
	trees := map[int]*sweepTree{}
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("claimed=%d", n), func(b *testing.B) {
			st := trees[n]
			if st == nil {
				st = newSweepTree(b, dir, n)
				trees[n] = st
				parent.Cleanup(func() { st.db.Close() })
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				inst, err := core.Open(ctx, st.host, st.cfg, stopDriver)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				rep, err := recovery.Sweep(ctx, inst)
				if err != nil {
					b.Fatal(err)
				}
				if err := inst.WaitIdle(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if got := rep.Count(core.Resume); got != n {
					b.Fatalf("resumed %d of %d claims", got, n)
				}
				inst.Abandon()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/claim")
		})
	}
}
