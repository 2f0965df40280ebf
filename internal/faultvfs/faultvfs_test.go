package faultvfs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
)

var ctx = context.Background()

var names atomic.Int64

// setup registers a fault under a fresh VFS name and opens a database file
// through it (WAL, synchronous=FULL: sqlitedb's settings, which Open
// reads back, so the wrapper must keep WAL working).
func setup(t *testing.T, now func() int64) (*faultvfs.Fault, *sqlitedb.DB, string, string) {
	t.Helper()
	f := faultvfs.New(now)
	name := fmt.Sprintf("faultvfs-test-%d", names.Add(1))
	faultvfs.Register(name, f)
	t.Cleanup(func() { faultvfs.Unregister(name) })
	path := filepath.Join(t.TempDir(), "tree with spaces?.db")
	db := open(t, path, name)
	exec(t, db, `CREATE TABLE v (x)`)
	return f, db, path, name
}

func open(t *testing.T, path, vfs string) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open(path, sqlitedb.Options{VFS: vfs, BusyTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func insert(db storage.DB, x int) error {
	return db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO v VALUES (?)`, x)
		return err
	})
}

func exec(t *testing.T, db storage.DB, q string) {
	t.Helper()
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error { _, err := tx.Exec(q); return err }))
}

func rows(t *testing.T, db storage.DB) string {
	t.Helper()
	var s string
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT COALESCE(group_concat(x), '') FROM (SELECT x FROM v ORDER BY rowid)`, nil, &s)
		return err
	}))
	return s
}

func TestFailNextWritesWithFull(t *testing.T) {
	f, db, _, _ := setup(t, func() int64 { return 0 })
	f.FailNext(2, faultvfs.Full)
	for range 2 {
		err := insert(db, 1)
		require.Error(t, err)
		assert.ErrorIs(t, err, storage.CodeFull)
		assert.True(t, storage.IsTransient(err))
	}
	require.NoError(t, insert(db, 2), "the count is used up")
	assert.Equal(t, "2", rows(t, db), "the failed transactions left nothing")
	assert.Equal(t, 2, f.Failed())
}

// A window is judged by the Fault's clock: writes fail while it reads
// inside the window and succeed once it has passed, with the IOERR
// extended code kept all the way up.
func TestFailBetweenFollowsTheClock(t *testing.T) {
	var now atomic.Int64
	now.Store(1000)
	f, db, _, _ := setup(t, now.Load)
	f.FailFor(5*time.Second, faultvfs.IOErrWrite)
	assert.True(t, f.Failing())
	err := insert(db, 1)
	assert.Equal(t, storage.CodeIOErr|3<<8, storage.CodeOf(err), "SQLITE_IOERR_WRITE, not just IOERR")
	now.Store(5999)
	assert.Error(t, insert(db, 2))
	now.Store(6000)
	assert.False(t, f.Failing())
	require.NoError(t, insert(db, 3))
	assert.Equal(t, "3", rows(t, db))

	f.FailBetween(7000, 8000, faultvfs.Full)
	require.NoError(t, insert(db, 4), "a window in the future fails nothing yet")
	now.Store(7000)
	assert.ErrorIs(t, insert(db, 5), storage.CodeFull)
	f.Heal()
	require.NoError(t, insert(db, 6))
	assert.Equal(t, "3,4,6", rows(t, db))
}

// A late commit error is reported for a transaction that is durable and
// visible, on this connection and on a fresh one, and the file is sound.
func TestLateCommitIsDurableButReportedFailed(t *testing.T) {
	f, db, path, name := setup(t, func() int64 { return 0 })
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Query(`SELECT count(*) FROM v`)
		return err
	}), "a transaction that wrote nothing is not the one that fails")
	err := insert(db, 1)
	require.Error(t, err)
	assert.Equal(t, storage.CodeIOErr|4<<8, storage.CodeOf(err), "SQLITE_IOERR_FSYNC")
	assert.True(t, storage.IsTransient(err), "a caller retries it, and must recognise the commit")
	assert.Equal(t, 1, f.LateCommits())
	assert.Equal(t, "1", rows(t, db), "committed all the same")
	require.NoError(t, insert(db, 2), "the connection goes on working")
	other := open(t, path, name)
	assert.Equal(t, "1,2", rows(t, other))
	var verdict string
	require.NoError(t, other.Tx(ctx, func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `PRAGMA integrity_check`, nil, &verdict)
		return err
	}))
	assert.Equal(t, "ok", verdict)
}

// A window of late commits follows the clock: a commit that wrote inside
// it is durable and reported failed, one outside it is not, and a
// transaction that wrote nothing never fails.
func TestFailLateBetweenFollowsTheClock(t *testing.T) {
	var now atomic.Int64
	now.Store(1000)
	f, db, _, _ := setup(t, now.Load)
	f.FailLateBetween(2000, 3000, faultvfs.IOErrFsync)
	require.NoError(t, insert(db, 1), "before the window")
	now.Store(2000)
	err := insert(db, 2)
	assert.Equal(t, storage.CodeIOErr|4<<8, storage.CodeOf(err), "SQLITE_IOERR_FSYNC")
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Query(`SELECT count(*) FROM v`)
		return err
	}), "a transaction that wrote nothing")
	now.Store(2999)
	assert.Error(t, insert(db, 3))
	now.Store(3000)
	require.NoError(t, insert(db, 4), "after the window")
	assert.Equal(t, "1,2,3,4", rows(t, db), "the late ones committed all the same")
	assert.Equal(t, 2, f.LateCommits())
	assert.Zero(t, f.Failed(), "no write failed")

	f.FailLateBetween(4000, 5000, faultvfs.IOErrFsync)
	now.Store(4000)
	assert.Error(t, insert(db, 5), "in the second window")
	f.Heal()
	require.NoError(t, insert(db, 6), "healed")
}

// The wrapper forwards locking and shared memory: under WAL a second
// connection holding BEGIN IMMEDIATE makes the first meet SQLITE_BUSY, and
// readers still see committed rows.
func TestBusyUnderWALThroughTheWrapper(t *testing.T) {
	_, db, path, name := setup(t, func() int64 { return 0 })
	holder := open(t, path, name)
	require.NoError(t, insert(db, 1))
	holding, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- holder.Tx(ctx, func(tx storage.Tx) error {
			if _, err := tx.Exec(`INSERT INTO v VALUES (2)`); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	err := insert(db, 3)
	assert.ErrorIs(t, err, storage.CodeBusy)
	assert.True(t, storage.IsTransient(err))
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, insert(db, 3), "the rerun lands once the lock is let go")
	assert.Equal(t, "1,2,3", rows(t, db))
	var mode string
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `PRAGMA journal_mode`, nil, &mode)
		return err
	}))
	assert.Equal(t, "wal", mode)
}

// The code given to FailNext and FailLateCommits is the one the caller
// sees, not some default: tests pick it to drive a particular classification.
func TestCountedFaultsReportTheirOwnCode(t *testing.T) {
	f, db, _, _ := setup(t, func() int64 { return 0 })
	f.FailNext(1, faultvfs.IOErrWrite)
	assert.Equal(t, storage.CodeIOErr|3<<8, storage.CodeOf(insert(db, 1)), "SQLITE_IOERR_WRITE")
	f.FailLateCommits(1, faultvfs.IOErrWrite)
	assert.Equal(t, storage.CodeIOErr|3<<8, storage.CodeOf(insert(db, 2)), "a late SQLITE_IOERR_WRITE")
	assert.Equal(t, "2", rows(t, db))
}

// Windows add up (FailBetween, FailLateBetween): a second window does not
// replace the first.
func TestWindowsAddUp(t *testing.T) {
	var now atomic.Int64
	now.Store(1000)
	f, db, _, _ := setup(t, now.Load)
	f.FailBetween(1000, 2000, faultvfs.Full)
	f.FailBetween(3000, 4000, faultvfs.IOErrWrite)
	f.FailLateBetween(5000, 6000, faultvfs.IOErrFsync)
	f.FailLateBetween(7000, 8000, faultvfs.IOErrFsync)
	assert.ErrorIs(t, insert(db, 1), storage.CodeFull, "in the first window")
	now.Store(3000)
	assert.Equal(t, storage.CodeIOErr|3<<8, storage.CodeOf(insert(db, 2)), "in the second window")
	now.Store(5000)
	assert.Error(t, insert(db, 3), "in the first late window")
	now.Store(7000)
	assert.Error(t, insert(db, 4), "in the second late window")
	assert.Equal(t, 2, f.LateCommits())
	assert.Equal(t, "3,4", rows(t, db))
}

// Heal clears counted late commits too, not only write faults and windows.
func TestHealClearsPendingLateCommits(t *testing.T) {
	f, db, _, _ := setup(t, func() int64 { return 0 })
	f.FailLateCommits(2, faultvfs.IOErrFsync)
	f.Heal()
	require.NoError(t, insert(db, 1))
	assert.Zero(t, f.LateCommits())
}
