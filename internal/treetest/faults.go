package treetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
)

var vfsSeq atomic.Int64 // VFS names are process-wide: one per tree

// Faults makes every instance booted from now on open the tree's file
// through a fault-injecting VFS whose windows follow the tree's fake clock.
// It returns the Fault to control. Read is unaffected: it uses a
// plain connection, as a reader that needs no write would.
func (tr *Tree) Faults() *faultvfs.Fault {
	f := faultvfs.New(tr.Clock.Now)
	name := fmt.Sprintf("treetest-%d", vfsSeq.Add(1))
	faultvfs.Register(name, f)
	// Registered before any connection opens, so unregistered after every
	// connection's cleanup has closed it.
	tr.T.Cleanup(func() { faultvfs.Unregister(name) })
	tr.DB.VFS = name
	return f
}

// watchWaits has instances booted from now on report their waits for
// storage on tr.waits (New calls it).
func (tr *Tree) watchWaits() {
	if tr.waits != nil {
		return
	}
	waits := make(chan retry.Wait, 4096)
	tr.waits = waits
	tr.Cfg = tr.Cfg.WithRetryObserver(func(w retry.Wait) {
		select {
		case waits <- w:
		default: // nobody drives: a test that never looks loses nothing
		}
	})
}

// Drive runs f and, until it returns, moves the fake clock to the end of
// every wait for storage as the wait is announced: virtual time passes
// exactly as fast as the retries need, and only while something waits. It
// returns the waits it saw. A generous real-time limit fails the test
// instead of hanging it.
func (tr *Tree) Drive(f func()) []retry.Wait {
	tr.T.Helper()
	return tr.DriveEach(f, nil)
}

// DriveEach is Drive calling each (if not nil) with every wait, before the
// clock moves past it: a test acts there at a chosen point of an outage.
func (tr *Tree) DriveEach(f func(), each func(retry.Wait)) []retry.Wait {
	tr.T.Helper()
	tr.watchWaits()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	limit := time.NewTimer(60 * time.Second)
	defer limit.Stop()
	var seen []retry.Wait
	for {
		select {
		case w := <-tr.waits:
			seen = append(seen, w)
			if each != nil {
				each(w)
			}
			tr.Clock.Set(w.Until)
		case <-done:
			return seen
		case <-limit.C:
			tr.T.Fatalf("treetest: still running after %d waits for storage", len(seen))
		}
	}
}

// IdleDriving waits until no execution runs on the node, driving the clock
// through waits for storage meanwhile (see Drive).
func (n *Node) IdleDriving() []retry.Wait {
	n.tree.T.Helper()
	return n.tree.Drive(n.Idle)
}

// HoldWriteLock opens a second connection to the tree's file and holds a
// write transaction (BEGIN IMMEDIATE) on it until release is called: every
// other connection meets SQLITE_BUSY once its busy timeout passes, as it
// would a zombie instance's write.
func (tr *Tree) HoldWriteLock() (release func()) {
	tr.T.Helper()
	db, err := sqlitedb.Open(tr.Path, sqlitedb.Options{})
	require.NoError(tr.T, err)
	holding, free, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Tx(context.Background(), func(tx storage.Tx) error {
			close(holding)
			<-free
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-done:
		tr.T.Fatalf("treetest: hold the write lock: %v", err)
	}
	var once atomic.Bool
	release = func() {
		if once.Swap(true) {
			return
		}
		close(free)
		require.NoError(tr.T, <-done)
		require.NoError(tr.T, db.Close())
	}
	tr.T.Cleanup(release)
	return release
}

// IntegrityCheck runs PRAGMA integrity_check on a fresh connection and
// returns its verdict ("ok" when the file is sound).
func (tr *Tree) IntegrityCheck() string {
	tr.T.Helper()
	var verdict string
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `PRAGMA integrity_check`, nil, &verdict)
		return err
	})
	return verdict
}
