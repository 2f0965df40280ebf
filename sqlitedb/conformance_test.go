package sqlitedb_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/storage/storagetest"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
)

// suiteDB is a sqlitedb.DB with the suite's optional capabilities: rivals
// on its file, and commits failed through a fault VFS (a write failing
// with BUSY during COMMIT leaves the transaction open, as SQLite's BUSY
// commit does). Close is the DB's own.
type suiteDB struct {
	*sqlitedb.DB
	path  string
	vfs   string
	fault *faultvfs.Fault
}

var vfsSeq atomic.Int64

// openSuiteDB opens a fresh database under dir through a fault VFS of its
// own, closed (and the VFS unregistered) by t's cleanups.
func openSuiteDB(t conform.T, dir string) *suiteDB {
	d := &suiteDB{
		path:  filepath.Join(dir, "tree.db"),
		vfs:   fmt.Sprintf("sqlitedb-conformance-%d", vfsSeq.Add(1)),
		fault: faultvfs.New(func() int64 { return 0 }),
	}
	faultvfs.Register(d.vfs, d.fault)
	t.Cleanup(func() { faultvfs.Unregister(d.vfs) })
	d.DB = d.open(t, 0)
	return d
}

func (d *suiteDB) open(t conform.T, wait time.Duration) *sqlitedb.DB {
	db, err := sqlitedb.Open(d.path, sqlitedb.Options{VFS: d.vfs, BusyTimeout: wait})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func (d *suiteDB) Rival(t conform.T, wait time.Duration) storage.DB { return d.open(t, wait) }

func (d *suiteDB) FailNextCommit(code storage.Code) { d.fault.FailNext(1, faultvfs.Code(code)) }

var (
	_ storagetest.Rivals       = (*suiteDB)(nil)
	_ storagetest.CommitFaults = (*suiteDB)(nil)
	_ storagetest.Closer       = (*suiteDB)(nil)
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(ct conform.T) storage.DB { return openSuiteDB(ct, t.TempDir()) })
}

// commitsOnError is a deliberately broken DB: it commits fn's writes even
// when fn returns an error (and then returns that error).
type commitsOnError struct{ *suiteDB }

func (b commitsOnError) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	var fnErr error
	if err := b.suiteDB.Tx(ctx, func(tx storage.Tx) error { fnErr = fn(tx); return nil }); err != nil {
		return err
	}
	return fnErr
}

// TestConformanceCatchesCommitOnError runs the suite against commitsOnError
// and checks that exactly the tests that write and then fail catch it.
func TestConformanceCatchesCommitOnError(t *testing.T) {
	r := conform.Record("suite", func(ct conform.T) {
		storagetest.RunT(ct, func(ct conform.T) storage.DB { return commitsOnError{openSuiteDB(ct, t.TempDir())} })
	})
	assert.Equal(t, []string{
		"suite/tx/rolls back when fn returns an error",
		"suite/tx/a failed transaction leaves the DB usable",
		"suite/values/an unsupported argument is an error",
		"suite/errors/a constraint violation is coded and permanent",
	}, r.Failures())
}

// autocommit is a deliberately broken DB: each statement of a transaction
// commits on its own, so another connection's commit can land between a
// transaction's read and its write.
type autocommit struct{ *suiteDB }

func (a autocommit) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	return fn(autoTx{ctx: ctx, db: a.suiteDB})
}

type autoTx struct {
	ctx context.Context
	db  storage.DB
}

func (x autoTx) Exec(query string, args ...any) (n int64, err error) {
	err = x.db.Tx(x.ctx, func(tx storage.Tx) error {
		n, err = tx.Exec(query, args...)
		return err
	})
	return n, err
}

func (x autoTx) Query(query string, args ...any) (rows *storage.Rows, err error) {
	err = x.db.Tx(x.ctx, func(tx storage.Tx) error {
		rows, err = tx.Query(query, args...)
		return err
	})
	return rows, err
}

// TestConformanceCatchesAutocommit runs the suite against autocommit and
// checks that the isolation test core's fences rely on catches it.
func TestConformanceCatchesAutocommit(t *testing.T) {
	r := conform.Record("suite", func(ct conform.T) {
		storagetest.RunT(ct, func(ct conform.T) storage.DB { return autocommit{openSuiteDB(ct, t.TempDir())} })
	})
	assert.Contains(t, r.Failures(), "suite/busy/a rival commits nothing between a transaction's read and its write")
}
