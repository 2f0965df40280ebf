package core_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
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
