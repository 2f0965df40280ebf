package core_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/sqlitedb"
)

// The append benchmarks measure what every durable step of a turn pays: one
// fenced transaction through Execution.Append on a file-backed database with
// revenant's settings (WAL, synchronous=FULL), so each op includes a commit
// and its fsync. BenchmarkRawInsert is the same commit without core (no
// fence check, no seq read, no projection), so the difference is core's
// overhead over SQLite.

// runningExecution boots a tree on a temporary file and returns an
// execution that stays running (a "hold" prompt) for the benchmark to
// append through.
func runningExecution(b *testing.B) *core.Execution {
	b.Helper()
	tr := treetest.New(b)
	d := treetest.NewDriver(1)
	n := tr.Boot(d)
	sid := n.NewSession("bench")
	n.Admit(sid, "hold")
	return <-d.Started // the node is crashed at cleanup, which ends the execution
}

func progressEvent(x *core.Execution, i int) core.NewEvent {
	return core.NewEvent{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: x.ID(), What: fmt.Sprintf("bench step %d", i)}}
}

func BenchmarkAppendOne(b *testing.B) {
	x := runningExecution(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := x.Append(ctx, false, progressEvent(x, i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkAppendBatch10(b *testing.B) {
	const batch = 10
	x := runningExecution(b)
	b.ReportAllocs()
	evs := make([]core.NewEvent, batch)
	i := 0
	for b.Loop() {
		for j := range evs {
			evs[j] = progressEvent(x, i)
			i++
		}
		if _, err := x.Append(ctx, false, evs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
}

// BenchmarkRawInsert is one single-row INSERT transaction per op on a table
// shaped like the event log, through sqlitedb with the same settings.
func BenchmarkRawInsert(b *testing.B) {
	db, err := sqlitedb.Open(filepath.Join(b.TempDir(), "raw.db"), sqlitedb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	err = db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`CREATE TABLE events (
			session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL UNIQUE,
			type TEXT NOT NULL, at INTEGER NOT NULL, data TEXT NOT NULL,
			PRIMARY KEY (session_id, seq)) WITHOUT ROWID`)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	seq := int64(0)
	for b.Loop() {
		seq++
		data, err := json.Marshal(event.ProgressMade{ExecutionID: "id-5", What: fmt.Sprintf("bench step %d", seq)})
		if err != nil {
			b.Fatal(err)
		}
		err = db.Tx(ctx, func(tx storage.Tx) error {
			_, err := tx.Exec(`INSERT INTO events (session_id, seq, id, type, at, data) VALUES (?, ?, ?, ?, ?, ?)`,
				"bench", seq, fmt.Sprintf("ev-%d", seq), string(event.Progress), int64(treetest.Start), string(data))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInterruptIdleTreeWithManySubagents is an interrupt of an idle
// root whose past turns ran many sub-agents (3,000 ended jobs, children
// and grandchildren): what is left to stop below it is looked for from
// the few claims upwards, not by walking every ended job down.
func BenchmarkInterruptIdleTreeWithManySubagents(b *testing.B) {
	tr := treetest.New(b)
	n := tr.Boot(treetest.NewDriver(1))
	n.NewSession("root")
	tr.Read(func(tx storage.Tx) error {
		for i := range 1_000 {
			child := fmt.Sprintf("root.%d", 3*i+1)
			rows := [][2]string{{child, "root"}, {fmt.Sprintf("root.%d", 3*i+2), child}, {fmt.Sprintf("root.%d", 3*i+3), child}}
			for _, r := range rows {
				if _, err := tx.Exec(`INSERT INTO jobs (child_id, parent_id, call_id, state) VALUES (?, ?, ?, 'ended')`, r[0], r[1], "call-"+r[0]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	b.ReportAllocs()
	for b.Loop() {
		did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
		if err != nil || did {
			b.Fatalf("interrupt of an idle root: %v, %v", did, err)
		}
	}
}

// BenchmarkSnapshotOfALongSession is a snapshot of a session whose turns
// took 20,000 model steps, each answer 2 KB (about 40 MB of answers in
// the steps table): the steps still streaming, which a snapshot lists,
// are found by an index, not by reading every step the tree has had.
func BenchmarkSnapshotOfALongSession(b *testing.B) {
	tr := treetest.New(b)
	n := tr.Boot(treetest.NewDriver(1))
	id := n.NewSession("s")
	text := strings.Repeat("x", 2<<10)
	tr.Read(func(tx storage.Tx) error {
		for i := range 20_000 {
			if _, err := tx.Exec(`INSERT INTO steps (id, session_id, prompt_id, execution_id, idx, state, text, started_seq)
				VALUES (?, ?, ?, 'x', 0, 'completed', ?, ?)`, fmt.Sprintf("step-%d", i), id, fmt.Sprintf("prompt-%d", i), text, 1_000_000+i); err != nil {
				return err
			}
		}
		return nil
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := n.Inst.Snapshot(ctx, id, 0, 50); err != nil {
			b.Fatal(err)
		}
	}
}
