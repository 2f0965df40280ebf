package sqlitedb_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/storage/storagetest"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
)

var ctx = context.Background()

func openAt(t *testing.T, path string, opts sqlitedb.Options) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func newDB(t *testing.T) (*sqlitedb.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tree.db")
	return openAt(t, path, sqlitedb.Options{}), path
}

func exec(t *testing.T, db storage.DB, query string, args ...any) {
	t.Helper()
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(query, args...)
		return err
	}))
}

func queryOne(t *testing.T, db storage.DB, query string, args ...any) any {
	t.Helper()
	var v any
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		found, err := storage.QueryRow(tx, query, args, &v)
		require.True(t, found, "%s returned no row", query)
		return err
	}))
	return v
}

func count(t *testing.T, db storage.DB, table string) int64 {
	t.Helper()
	return queryOne(t, db, `SELECT count(*) FROM `+table).(int64)
}

func TestSettingsReadBack(t *testing.T) {
	db, path := newDB(t)
	assert.Equal(t, "wal", queryOne(t, db, `PRAGMA journal_mode`))
	assert.Equal(t, int64(2), queryOne(t, db, `PRAGMA synchronous`), "FULL")
	assert.Equal(t, int64(1), queryOne(t, db, `PRAGMA foreign_keys`))
	assert.Equal(t, sqlitedb.DefaultBusyTimeout.Milliseconds(), queryOne(t, db, `PRAGMA busy_timeout`))
	assert.Equal(t, path, db.Path())

	short := openAt(t, path, sqlitedb.Options{BusyTimeout: 25 * time.Millisecond})
	assert.Equal(t, int64(25), queryOne(t, short, `PRAGMA busy_timeout`))
	assert.Equal(t, int64(2), queryOne(t, short, `PRAGMA synchronous`), "every connection gets the settings")
}

// A query of two statements is refused, never run in part (the suite
// leaves multi-statement queries to each host: ncruces prepares one at a
// time); the connection and its statement cache stay usable.
func TestTwoStatementsRefused(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE v (a)`)
	err := db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO v VALUES (1); INSERT INTO v VALUES (2)`)
		return err
	})
	assert.ErrorContains(t, err, "more than one statement")
	assert.Zero(t, count(t, db, "v"))
	exec(t, db, `INSERT INTO v VALUES (1)`)
}

// SQL with no statement in it (white space, comments) is an error, not a
// panic: SQLite prepares nothing for it.
func TestEmptyStatementRefused(t *testing.T) {
	db, _ := newDB(t)
	for _, q := range []string{"", "  \n", "-- only a comment\n", "/* nothing */"} {
		err := db.Tx(ctx, func(tx storage.Tx) error {
			_, err := tx.Exec(q)
			return err
		})
		assert.ErrorContains(t, err, "no statement", "Exec(%q)", q)
		err = db.Tx(ctx, func(tx storage.Tx) error {
			_, err := tx.Query(q)
			return err
		})
		assert.ErrorContains(t, err, "no statement", "Query(%q)", q)
	}
}

// foreign_keys is on: a dangling reference is SQLITE_CONSTRAINT_FOREIGNKEY.
func TestForeignKeysEnforced(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE parent (id TEXT PRIMARY KEY)`)
	exec(t, db, `CREATE TABLE child (parent_id TEXT REFERENCES parent (id))`)
	err := db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO child VALUES ('nobody')`)
		return err
	})
	assert.Equal(t, storage.CodeConstraint|3<<8, storage.CodeOf(err), "%v", err)
}

// A real SQLITE_FULL, from a page limit on this connection, is coded FULL,
// transient, rolls back, and the same write succeeds once space returns.
func TestFullIsCodedAndTransient(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE big (b BLOB)`)
	pages := queryOne(t, db, `PRAGMA page_count`).(int64)
	queryOne(t, db, `PRAGMA max_page_count = `+itoa(pages+2))

	insert := func(tx storage.Tx) error {
		for range 8 {
			if _, err := tx.Exec(`INSERT INTO big VALUES (zeroblob(4096))`); err != nil {
				return err
			}
		}
		return nil
	}
	err := db.Tx(ctx, insert)
	require.Error(t, err)
	assert.ErrorIs(t, err, storage.CodeFull)
	assert.Equal(t, storage.CodeFull, storage.CodeOf(err).Primary())
	assert.True(t, storage.IsTransient(err))
	assert.Zero(t, count(t, db, "big"), "the failed transaction left nothing")

	queryOne(t, db, `PRAGMA max_page_count = 1073741823`)
	require.NoError(t, db.Tx(ctx, insert), "the whole transaction reruns once space returns")
	assert.Equal(t, int64(8), count(t, db, "big"))
}

func itoa(n int64) string {
	var b strings.Builder
	if n == 0 {
		return "0"
	}
	var digits []byte
	for ; n > 0; n /= 10 {
		digits = append(digits, byte('0'+n%10))
	}
	for i := len(digits) - 1; i >= 0; i-- {
		b.WriteByte(digits[i])
	}
	return b.String()
}

// BEGIN IMMEDIATE: a writer meets another connection's lock at BEGIN,
// before fn runs, where rerunning costs nothing.
func TestBusyMeetsBeginBeforeFn(t *testing.T) {
	db, path := newDB(t)
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	release := make(chan struct{})
	held := storagetest.Hold(conform.Wrap(t), db, `INSERT INTO v VALUES ('holder')`, release)
	ran := false
	err := openAt(t, path, sqlitedb.Options{BusyTimeout: time.Millisecond}).Tx(ctx, func(storage.Tx) error { ran = true; return nil })
	close(release)
	require.NoError(t, <-held)
	assert.ErrorIs(t, err, storage.CodeBusy)
	assert.False(t, ran)
}

func TestCloseTwice(t *testing.T) {
	db, _ := newDB(t)
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "closing twice is harmless")
}

func TestOpenFailsOnMissingDirectory(t *testing.T) {
	_, err := sqlitedb.Open(filepath.Join(t.TempDir(), "no", "such", "dir", "tree.db"), sqlitedb.Options{})
	require.Error(t, err)
	assert.ErrorIs(t, err, storage.CodeCantOpen)
}

// TestClassificationOfRealFailures is DESIGN §8's table on failures SQLite
// itself produced (core/storage/testdata holds the same table as vectors
// every host runs): classification reads codes, walks wrapped and joined
// errors, needs every part transient, and never retries a cancellation.
func TestClassificationOfRealFailures(t *testing.T) {
	now := int64(0)
	fault := faultvfs.New(func() int64 { return now })
	faultvfs.Register("sqlitedb-classification", fault)
	t.Cleanup(func() { faultvfs.Unregister("sqlitedb-classification") })
	path := filepath.Join(t.TempDir(), "tree.db")
	db := openAt(t, path, sqlitedb.Options{VFS: "sqlitedb-classification", BusyTimeout: 20 * time.Millisecond})
	exec(t, db, `CREATE TABLE v (who TEXT UNIQUE)`)
	exec(t, db, `CREATE TABLE big (b BLOB)`)
	write := func(who string) error {
		return db.Tx(ctx, func(tx storage.Tx) error {
			if _, err := tx.Exec(`INSERT INTO v VALUES (?)`, who); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO big VALUES (zeroblob(4096))`)
			return err
		})
	}

	// A real SQLITE_FULL: the page limit leaves no room for one more row.
	pages := queryOne(t, db, `PRAGMA page_count`).(int64)
	queryOne(t, db, `PRAGMA max_page_count = `+itoa(pages))
	full := write("full")
	queryOne(t, db, `PRAGMA max_page_count = 1073741823`)

	// SQLITE_BUSY from a second connection holding BEGIN IMMEDIATE, in a
	// cause wrapped twice more the way core wraps it.
	release := make(chan struct{})
	held := storagetest.Hold(conform.Wrap(t), openAt(t, path, sqlitedb.Options{}), `INSERT INTO v VALUES ('holder')`, release)
	busy := fmt.Errorf("append for execution x: %w", fmt.Errorf("append session.created@1: %w", write("busy")))
	close(release)
	require.NoError(t, <-held)

	// IOERR extended codes from the device, kept whole.
	fault.FailNext(1, faultvfs.IOErrWrite)
	ioWrite := write("io")
	fault.FailLateCommits(1, faultvfs.IOErrFsync)
	ioFsync := write("late") // durable, reported failed

	// A constraint violation: the row "late" is stored.
	constraint := write("late")

	// A cancellation cut a busy wait short; joined with a FULL it is still
	// not transient.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	fullAndCancelled := errors.Join(full, db.Tx(cancelled, func(storage.Tx) error { return nil }))

	for _, tc := range []struct {
		name      string
		err       error
		code      storage.Code
		transient bool
	}{
		{"FULL from max_page_count", full, storage.CodeFull, true},
		{"BUSY in a nested cause", busy, storage.CodeBusy, true},
		{"IOERR_WRITE", ioWrite, storage.CodeIOErr | 3<<8, true},
		{"IOERR_FSYNC after a durable commit", ioFsync, storage.CodeIOErr | 4<<8, true},
		{"CONSTRAINT_UNIQUE", constraint, storage.CodeConstraint | 8<<8, false},
		{"FULL joined with a cancellation", fullAndCancelled, storage.CodeFull, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			assert.Equal(t, tc.code, storage.CodeOf(tc.err), "%v", tc.err)
			assert.ErrorIs(t, tc.err, tc.code.Primary(), "errors.Is by primary code")
			assert.Equal(t, tc.transient, storage.IsTransient(tc.err), "%v", tc.err)
		})
	}
	assert.ErrorIs(t, busy, sqlite3.BUSY, "ncruces's own values match through the chain")
	assert.ErrorIs(t, ioWrite, sqlite3.IOERR_WRITE)
	assert.Equal(t, "late", queryOne(t, db, `SELECT group_concat(who) FROM v WHERE who != 'holder'`), "only the late commit stored a row")
}

// Exec reports the rows its own statement changed: a statement that
// changes none (DDL, a pragma, a DELETE matching nothing) reports 0, not
// the count SQLite's changes() keeps from the last INSERT, UPDATE or
// DELETE.
func TestExecCountsOnlyItsOwnChanges(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE v (a)`)
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		n, err := tx.Exec(`INSERT INTO v VALUES (1), (2), (3)`)
		require.NoError(t, err)
		assert.Equal(t, int64(3), n)
		for _, q := range []string{`CREATE TABLE w (b)`, `CREATE INDEX v_a ON v (a)`, `DELETE FROM v WHERE a > 9`, `PRAGMA user_version = 7`} {
			n, err := tx.Exec(q)
			require.NoError(t, err, q)
			assert.Zero(t, n, q)
		}
		n, err = tx.Exec(`UPDATE v SET a = a + 10 WHERE a < 3`)
		require.NoError(t, err)
		assert.Equal(t, int64(2), n)
		return nil
	}))
}

// Open reads WAL back and refuses a database that will not use it (an
// in-memory one reports "memory"), rather than run without the journal
// DESIGN §8's durability rests on.
func TestOpenRefusesADatabaseWithoutWAL(t *testing.T) {
	db, err := sqlitedb.Open(":memory:", sqlitedb.Options{})
	if db != nil {
		db.Close()
	}
	require.Error(t, err)
	assert.ErrorContains(t, err, "want wal")
}

// A context that ends while fn runs must not stop the rollback that cleans
// up after fn's error: the transaction ends with Tx, and no write lock is
// left for another connection to meet.
func TestContextEndingInsideFnStillRollsBack(t *testing.T) {
	db, path := newDB(t)
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	txCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := errors.New("stopped")
	err := db.Tx(txCtx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO v VALUES ('lost')`)
		require.NoError(t, err)
		cancel()
		return stop
	})
	require.ErrorIs(t, err, stop)
	rival := openAt(t, path, sqlitedb.Options{BusyTimeout: -1})
	exec(t, rival, `INSERT INTO v VALUES ('rival')`) // the write lock is free at once
	assert.Equal(t, "rival", queryOne(t, db, `SELECT group_concat(who) FROM v`), "fn's insert was rolled back")
}

// A Tx's context interrupts the connection only while that Tx runs: once it
// returned, the context ending does not fail the Conn's next statements.
func TestTxContextEndingLaterDoesNotInterruptTheConn(t *testing.T) {
	db, _ := newDB(t)
	txCtx, cancel := context.WithCancel(ctx)
	require.NoError(t, db.Tx(txCtx, func(tx storage.Tx) error {
		_, err := tx.Exec(`CREATE TABLE v (who TEXT)`)
		return err
	}))
	cancel()
	c := db.Conn()
	_, err := c.Exec(`INSERT INTO v VALUES ('outside')`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Begin())
	_, err = c.Exec(`INSERT INTO v VALUES ('inside')`, nil)
	require.NoError(t, err)
	require.NoError(t, c.Commit())
	assert.Equal(t, int64(2), count(t, db, "v"))
}

// int arguments bind with all their bits, not only an int32's.
func TestIntArgumentKeepsEveryBit(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE v (n INTEGER)`)
	big := 1<<40 + 7
	exec(t, db, `INSERT INTO v VALUES (?)`, big)
	assert.Equal(t, int64(big), queryOne(t, db, `SELECT n FROM v`))
}

// A query that fails while its rows are read (not when prepared) is an
// error, coded, never a short result read as complete.
func TestQueryFailingMidwayIsAnError(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE v (n INTEGER)`)
	exec(t, db, `INSERT INTO v VALUES (1), (-9223372036854775808)`)
	err := db.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT abs(n) FROM v ORDER BY rowid`)
		assert.Nil(t, rows)
		return err
	})
	require.Error(t, err, "abs overflows on the second row")
	assert.ErrorIs(t, err, storage.CodeError)
	assert.False(t, storage.IsTransient(err))
}

// A path given as a "file:" URI is opened as given, with the VFS and
// parameters it names (the js/wasm tests name a lock-free VFS so): it is
// not wrapped again as a file name.
func TestOpenAFileURIAsGiven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "uri.db")
	db, err := sqlitedb.Open("file:"+filepath.ToSlash(path)+"?_pragma=locking_mode(exclusive)", sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		_, err := tx.Exec("CREATE TABLE t (x)")
		return err
	}))
	assert.FileExists(t, path)
}

// A database SQLite keeps out of WAL (temporary, in memory) is refused
// saying what to give instead, not only which journal mode it reports.
func TestDatabaseWithoutAFileRefusedSayingSo(t *testing.T) {
	for _, path := range []string{"", ":memory:"} {
		db, err := sqlitedb.Open(path, sqlitedb.Options{})
		if err == nil {
			db.Close()
		}
		require.Error(t, err, "%q", path)
		assert.Contains(t, err.Error(), "needs a database file", "%q", path)
	}
}
