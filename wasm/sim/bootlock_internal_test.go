package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A boot lock (-bootlock) opened right after the sweep's listing over a
// claim is another connection really holding the tree's write lock: a
// connection that waits for no lock, as the guest's does, is refused
// SQLITE_BUSY until the window's end, and may write once the lock is let
// go at that end (releaseDueLock, as a failed boot's pause reaches it).
// A lock that took nothing would leave TestBootLocksMeetABootsSweep
// passing, every boot "serving" a fault it never met.
func TestBootLockHoldsTheWriteLockUntilItsWindowEnds(t *testing.T) {
	tt := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tt.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()

	tr := &tree{path: tt.Path, booting: true, now: 10_000, bootLock: &bootFaulter{rng: rand.New(rand.NewPCG(1, 2)), left: 1}}
	t.Cleanup(tr.closeProbe)
	t.Cleanup(tr.releaseLock)
	g := &guest{t: tr, boot: 1}
	tr.cur = g
	tr.maybeBootFault(g, runtime.Site{Phase: runtime.PhaseSweep, Import: abi.ImportSQLCommit, After: true})
	require.NotNil(t, tr.lock, "another connection took the lock")
	assert.Same(t, tr.bootLock, g.faulted)
	assert.Equal(t, 1, tr.bootLock.n)
	until := tr.lock.until
	assert.Greater(t, until, tr.now, "the window lasts")

	guestDB, err := sqlitedb.Open(tt.Path, sqlitedb.Options{BusyTimeout: -1})
	require.NoError(t, err)
	c := guestDB.Conn()
	t.Cleanup(func() {
		if c.InTx() { // the test failed: its Begin took the lock
			_ = c.Rollback()
		}
		guestDB.Close()
	})
	err = c.Begin()
	require.Error(t, err, "a write began under the other connection's lock")
	assert.Equal(t, storage.CodeBusy, storage.CodeOf(err).Primary())

	tr.now = until - 1
	tr.releaseDueLock()
	require.NotNil(t, tr.lock, "let go before its window ended")
	tr.now = until
	tr.releaseDueLock()
	require.Nil(t, tr.lock, "still held as its window ended")
	require.NoError(t, c.Begin(), "the lock let go")
	require.NoError(t, c.Rollback())
	assert.Empty(t, tr.failures)
	assert.Empty(t, tr.notes)
}
