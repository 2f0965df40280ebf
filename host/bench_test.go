package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/sqlitedb"
)

// holdDriver announces every Run and then holds until its execution is
// cancelled: each claim it runs stays claimed, so a crash leaves it for the
// next Open to resume.
type holdDriver struct{ started chan string }

func (d holdDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.started <- x.SessionID()
	<-ctx.Done()
	return core.Outcome{Kind: core.Stopped}
}

// BenchmarkRestart10000Trees100Claimed is the restart cost of DESIGN's local
// server (issue 4): a data directory with 10,000 tree files, 100 of them
// claimed with an execution that died in a crash. Each op opens the host
// over it and measures
//
//	ms-serving  Open returning: the host answers requests from here on
//	ms-resumed  every one of the 100 claims running again (the driver's Run
//	            has started for each)
//
// then crashes the host again (not timed), leaving the same state. The idle
// trees are copies of one empty tree file plus their index rows; the host
// must never open them (checked on the first op).
func BenchmarkRestart10000Trees100Claimed(b *testing.B) {
	const total, claimed = 10000, 100
	dir := b.TempDir()
	d := holdDriver{started: make(chan string, claimed)}
	// Every claimed tree holds a running execution, so all of them (and
	// the template) must fit under the cap on open trees.
	cfg := host.Config{DataDir: dir, Driver: d, ManualEviction: true, MaxOpenTrees: claimed + 1,
		// Every op resumes every claim once more: never run out of budget.
		Core: core.NewConfig().WithResumeBudget(1 << 30)}

	h, err := host.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.Create(ctx, "template", "bench", nil); err != nil {
		b.Fatal(err)
	}
	for i := range claimed {
		id := fmt.Sprintf("claimed-%03d", i)
		inst, err := h.Create(ctx, id, "bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inst.CreateSession(ctx, core.NewSession{ID: id, Principal: "bench"}); err != nil {
			b.Fatal(err)
		}
		if _, err := inst.Admit(ctx, id, core.PromptInput{Text: "work"}); err != nil {
			b.Fatal(err)
		}
		<-d.started
	}
	h.Crash()

	// The idle trees: byte copies of the empty template tree, and their rows.
	tmpl, err := os.ReadFile(filepath.Join(dir, "trees", "template.db"))
	if err != nil {
		b.Fatal(err)
	}
	var idle []string
	for i := range total - claimed - 1 {
		id := fmt.Sprintf("idle-%05d", i)
		if err := os.WriteFile(filepath.Join(dir, "trees", id+".db"), tmpl, 0o600); err != nil {
			b.Fatal(err)
		}
		idle = append(idle, id)
	}
	ix, err := sqlitedb.Open(filepath.Join(dir, "index.db"), sqlitedb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	err = ix.Tx(ctx, func(tx storage.Tx) error {
		for i, id := range idle {
			if _, err := tx.Exec(`INSERT INTO trees (id, principal, created_at) VALUES (?, 'bench', ?)`, id, int64(i)); err != nil {
				return err
			}
		}
		return nil
	})
	ix.Close()
	if err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "trees", "*.db"))
	if len(files) != total {
		b.Fatalf("%d tree files, want %d", len(files), total)
	}

	var serving, resumed time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		h, err := host.Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		serving += time.Since(start)
		for range claimed {
			<-d.started
		}
		resumed += time.Since(start)
		b.StopTimer()
		<-h.Recovered()
		st := h.Stats()
		if st.BootedAtOpen != claimed || st.Boots != claimed || st.BootFailures != 0 {
			b.Fatalf("stats %+v: want exactly the %d claimed trees booted", st, claimed)
		}
		if i == 0 {
			wals, _ := filepath.Glob(filepath.Join(dir, "trees", "*.db-wal"))
			for _, w := range wals {
				if !strings.Contains(w, "claimed-") {
					b.Fatalf("%s: an unclaimed tree was opened", w)
				}
			}
			if len(wals) != claimed {
				b.Fatalf("%d tree files open, want %d", len(wals), claimed)
			}
		}
		h.Crash()
		b.StartTimer()
	}
	b.ReportMetric(float64(serving.Microseconds())/1000/float64(b.N), "ms-serving")
	b.ReportMetric(float64(resumed.Microseconds())/1000/float64(b.N), "ms-resumed")
}
