package sqlitedb_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
)

// The simulator's settings: synchronous=OFF, read back, and no busy wait;
// foreign keys and WAL as everywhere.
func TestSimulatorSettingsReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tree.db")
	db := openAt(t, path, sqlitedb.Options{NoSync: true, BusyTimeout: -1})
	assert.Equal(t, int64(0), queryOne(t, db, `PRAGMA synchronous`), "OFF")
	assert.Equal(t, int64(0), queryOne(t, db, `PRAGMA busy_timeout`))
	assert.Equal(t, int64(1), queryOne(t, db, `PRAGMA foreign_keys`))
	assert.Equal(t, "wal", queryOne(t, db, `PRAGMA journal_mode`))
}

// hooks records what a DB's hooks hear.
type hooks struct {
	begins  int
	commits []int64
	// onCommit runs inside the Commit hook.
	onCommit func()
}

func (h *hooks) options() sqlitedb.Options {
	return sqlitedb.Options{Hooks: sqlitedb.Hooks{
		Begin: func() { h.begins++ },
		Commit: func(n int64) {
			h.commits = append(h.commits, n)
			if h.onCommit != nil {
				h.onCommit()
			}
		},
	}}
}

// The hooks hear every transaction begun and every commit, with the rows
// it changed, through Tx and Conn alike; a transaction rolled back is begun
// but never committed.
func TestHooksHearEveryCommit(t *testing.T) {
	var h hooks
	db := openAt(t, filepath.Join(t.TempDir(), "tree.db"), h.options())
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	exec(t, db, `INSERT INTO v VALUES ('a'), ('b')`)
	queryOne(t, db, `SELECT count(*) FROM v`)
	require.Error(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO v VALUES ('rolled back')`)
		require.NoError(t, err)
		return os.ErrInvalid
	}))

	c := db.Conn()
	require.NoError(t, c.Begin())
	_, err := c.Exec(`UPDATE v SET who = 'c'`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Commit())
	require.NoError(t, c.Begin())
	_, err = c.Exec(`DELETE FROM v`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Rollback())

	assert.Equal(t, 6, h.begins)
	assert.Equal(t, []int64{0, 2, 0, 2}, h.commits, "create, insert, read, update; nothing for the rollbacks")
}

// The Commit hook runs after the transaction ended and the lock is
// released: it may read the database, as the simulator does to judge the
// commit. (With the lock held this test would never end.)
func TestCommitHookMayUseTheDB(t *testing.T) {
	var h hooks
	db := openAt(t, filepath.Join(t.TempDir(), "tree.db"), h.options())
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	c := db.Conn()
	var seen []any
	h.onCommit = func() {
		assert.False(t, c.InTx(), "the transaction has ended")
		rows, err := c.Query(`SELECT count(*) FROM v`, nil)
		require.NoError(t, err)
		seen = append(seen, rows.Values[0][0])
	}
	require.NoError(t, c.Begin())
	_, err := c.Exec(`INSERT INTO v VALUES ('a')`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Commit())
	exec(t, db, `INSERT INTO v VALUES ('b')`)
	assert.Equal(t, []any{int64(1), int64(2)}, seen)
}

// Outside a transaction a Conn's statement runs on its own and commits at
// once; another connection sees it.
func TestConnStatementOutsideTransaction(t *testing.T) {
	db, path := newDB(t)
	c := db.Conn()
	_, err := c.Exec(`CREATE TABLE v (who TEXT)`, nil)
	require.NoError(t, err)
	n, err := c.Exec(`INSERT INTO v VALUES (?)`, []any{"a"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	rows, err := c.Query(`SELECT who FROM v`, nil)
	require.NoError(t, err)
	assert.Equal(t, [][]any{{"a"}}, rows.Values)
	assert.False(t, c.InTx())
	assert.Equal(t, int64(1), count(t, openAt(t, path, sqlitedb.Options{}), "v"))

	require.NoError(t, db.Close())
	_, err = c.Query(`SELECT who FROM v`, nil)
	assert.ErrorIs(t, err, storage.ErrClosed)
}

// Closing a Conn in the middle of a transaction is the death of its
// process: the transaction is rolled back and the file's write lock freed.
func TestConnCloseMidTransactionRollsBack(t *testing.T) {
	db, path := newDB(t)
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	c := db.Conn()
	require.NoError(t, c.Begin())
	_, err := c.Exec(`INSERT INTO v VALUES ('lost')`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.False(t, c.InTx())

	next := openAt(t, path, sqlitedb.Options{BusyTimeout: -1})
	exec(t, next, `INSERT INTO v VALUES ('next')`) // the write lock is free
	assert.Equal(t, int64(1), count(t, next, "v"), "only the successor's row")
	assert.ErrorIs(t, c.Begin(), storage.ErrClosed)
}

// A relative path opens through a VFS too (a URI needs an absolute one).
func TestVFSWithRelativePath(t *testing.T) {
	fault := faultvfs.New(func() int64 { return 0 })
	faultvfs.Register("sqlitedb-relative", fault)
	t.Cleanup(func() { faultvfs.Unregister("sqlitedb-relative") })
	dir := t.TempDir()
	t.Chdir(dir)
	db := openAt(t, "tree.db", sqlitedb.Options{VFS: "sqlitedb-relative", BusyTimeout: 20 * time.Millisecond})
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	_, err := os.Stat(filepath.Join(dir, "tree.db"))
	require.NoError(t, err)
}

// A Commit hook alone, without a Begin hook, hears each transaction's own
// changes, not the connection's running total.
func TestCommitHookAloneCountsEachTransaction(t *testing.T) {
	var commits []int64
	db := openAt(t, filepath.Join(t.TempDir(), "tree.db"), sqlitedb.Options{Hooks: sqlitedb.Hooks{
		Commit: func(n int64) { commits = append(commits, n) },
	}})
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	exec(t, db, `INSERT INTO v VALUES ('a'), ('b')`)
	exec(t, db, `INSERT INTO v VALUES ('c')`)
	assert.Equal(t, []int64{0, 2, 1}, commits)
}

// A Conn's COMMIT that fails and leaves its transaction open (SQLite's
// BUSY) keeps the Conn in it: InTx stays true, Rollback ends it, and the
// Conn begins and commits again.
func TestConnFailedCommitLeftOpenStaysInTx(t *testing.T) {
	fault := faultvfs.New(func() int64 { return 0 })
	faultvfs.Register("sqlitedb-conn-commit", fault)
	t.Cleanup(func() { faultvfs.Unregister("sqlitedb-conn-commit") })
	db := openAt(t, filepath.Join(t.TempDir(), "tree.db"), sqlitedb.Options{VFS: "sqlitedb-conn-commit"})
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	c := db.Conn()
	t.Cleanup(func() { c.Close() }) // frees the DB's lock should the test stop mid-transaction

	require.NoError(t, c.Begin())
	_, err := c.Exec(`INSERT INTO v VALUES ('lost')`, nil)
	require.NoError(t, err)
	fault.FailNext(1, faultvfs.Busy)
	err = c.Commit()
	assert.ErrorIs(t, err, storage.CodeBusy)
	require.True(t, c.InTx(), "the failed commit left the transaction open")
	require.NoError(t, c.Rollback())
	require.False(t, c.InTx())

	require.NoError(t, c.Begin())
	_, err = c.Exec(`INSERT INTO v VALUES ('kept')`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Commit())
	assert.Equal(t, "kept", queryOne(t, db, `SELECT group_concat(who) FROM v`))
}

// A statement that ends the transaction itself (INSERT OR ROLLBACK meeting
// a conflict) leaves the Conn's Rollback to succeed and end the Conn's
// transaction, releasing the DB for the next one.
func TestConnRollbackAfterSQLiteRolledBackItself(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE v (who TEXT UNIQUE)`)
	exec(t, db, `INSERT INTO v VALUES ('a')`)
	c := db.Conn()
	t.Cleanup(func() { c.Close() }) // frees the DB's lock should the test stop mid-transaction

	require.NoError(t, c.Begin())
	_, err := c.Exec(`INSERT INTO v VALUES ('b')`, nil)
	require.NoError(t, err)
	_, err = c.Exec(`INSERT OR ROLLBACK INTO v VALUES ('a')`, nil)
	assert.ErrorIs(t, err, storage.CodeConstraint)
	require.NoError(t, c.Rollback())
	require.False(t, c.InTx())
	assert.Equal(t, "a", queryOne(t, db, `SELECT group_concat(who) FROM v`), "'b' went with SQLite's rollback")
}

// A guest's statements run on the tree's connection as it sends them
// (wasm/runtime): none may open or write another file. ATTACH and VACUUM
// INTO (which attaches its target) are refused, in a transaction or not,
// and leave no file behind.
func TestNoOtherDatabaseFile(t *testing.T) {
	db, path := newDB(t)
	c := db.Conn()
	other := filepath.Join(filepath.Dir(path), "other.db")
	for _, q := range []string{
		fmt.Sprintf("ATTACH DATABASE '%s' AS other", other),
		fmt.Sprintf("VACUUM INTO '%s'", other),
	} {
		_, err := c.Exec(q, nil)
		assert.Error(t, err, "%s", q)
		require.NoError(t, c.Begin())
		_, err = c.Exec(q, nil)
		assert.Error(t, err, "%s in a transaction", q)
		require.NoError(t, c.Rollback())
		assert.NoFileExists(t, other, "%s", q)
	}
	_, err := c.Exec("CREATE TABLE still_usable (a)", nil)
	assert.NoError(t, err)
}
