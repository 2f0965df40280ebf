package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// faultSeq makes the tests' VFS names unique in the test binary.
var faultSeq atomic.Uint64

// newFaultEnv is newEnv over a connection opened through a fault VFS whose
// windows follow the services' virtual clock.
func newFaultEnv(t *testing.T, seed uint64, cfg runtime.BootConfig) (*env, *faultvfs.Fault) {
	t.Helper()
	if cfg.TreeID == "" {
		cfg.TreeID = treeID
	}
	s := newServices(seed)
	f := faultvfs.New(func() int64 { return s.now })
	name := fmt.Sprintf("runtime-test-fault-%d", faultSeq.Add(1))
	faultvfs.Register(name, f)
	path := filepath.Join(t.TempDir(), "tree.db")
	db, err := sqlitedb.Open(path, sqlitedb.Options{VFS: name})
	require.NoError(t, err)
	t.Cleanup(func() {
		db.Close()
		faultvfs.Unregister(name)
	})
	return &env{t: t, path: path, db: db, conn: db.Conn(), s: s, cfg: cfg}, f
}

// loggedIDs are the ids of every stored event, in commit order (gseq).
func (e *env) loggedIDs() []string {
	e.t.Helper()
	var ids []string
	err := e.db.Tx(context.Background(), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT id FROM events ORDER BY gseq`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	require.NoError(e.t, err)
	return ids
}

// emittedIDs are the ids of the durable events emitted so far, in order.
func (s *services) emittedIDs() []string {
	var ids []string
	for _, ev := range s.emits {
		if ev.Durable() {
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

// A commit that is durable but reported failed (a late IOERR) is found
// stored by core's rerun, which then writes nothing: its events must still
// reach emit, once, before anything committed after them (docs/abi.md §4).
// Here every commit of the turn is reported failed after it reached the
// disk.
func TestLateIOErrCommitsAreEmittedOnceInCommitOrder(t *testing.T) {
	e, f := newFaultEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("hello late commits")
	require.Equal(t, e.loggedIDs(), e.s.emittedIDs(), "before any fault")

	f.FailLateCommits(1_000, faultvfs.IOErrFsync)
	e.fireTimers(10 * 60_000)
	f.Heal()

	snap := e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	assert.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals())
	require.Positive(t, f.LateCommits(), "no commit was reported failed late")
	assert.Equal(t, e.loggedIDs(), e.s.emittedIDs(), "every durable event emitted once, in commit order")
}
