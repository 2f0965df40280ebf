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

	"github.com/revenantrt/revenant/core/storage"
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

func TestValuesRoundTrip(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE v (i, f, s, b, n, t, small)`)
	exec(t, db, `INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?)`, int64(1)<<53+1, 2.5, "text", []byte{0, 1, 2}, nil, true, 7)
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT i, f, s, b, n, t, small FROM v`)
		require.NoError(t, err)
		assert.Equal(t, []string{"i", "f", "s", "b", "n", "t", "small"}, rows.Columns)
		require.Equal(t, 1, rows.Len())
		assert.Equal(t, []any{int64(1)<<53 + 1, 2.5, "text", []byte{0, 1, 2}, nil, int64(1), int64(7)}, rows.Values[0])
		return nil
	}))
}

func TestStatementErrors(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE v (a)`)
	for name, run := range map[string]func(tx storage.Tx) error{
		"two statements": func(tx storage.Tx) error { _, err := tx.Exec(`SELECT 1; SELECT 2`); return err },
		"too few args":   func(tx storage.Tx) error { _, err := tx.Exec(`INSERT INTO v VALUES (?)`); return err },
		"too many args":  func(tx storage.Tx) error { _, err := tx.Exec(`INSERT INTO v VALUES (?)`, 1, 2); return err },
		"unsupported":    func(tx storage.Tx) error { _, err := tx.Exec(`INSERT INTO v VALUES (?)`, struct{}{}); return err },
		"syntax": func(tx storage.Tx) error {
			_, err := tx.Query(`SELEC 1`)
			assert.ErrorIs(t, err, storage.CodeError, "a syntax error carries SQLITE_ERROR")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, db.Tx(ctx, run))
			assert.Zero(t, count(t, db, "v"), "rolled back")
			exec(t, db, `INSERT INTO v VALUES (?)`, 1) // the connection and its cached statement still work
			exec(t, db, `DELETE FROM v`)
		})
	}
}

func TestConstraintViolationIsCodedAndPermanent(t *testing.T) {
	db, _ := newDB(t)
	exec(t, db, `CREATE TABLE parent (id TEXT PRIMARY KEY, name TEXT UNIQUE)`)
	exec(t, db, `CREATE TABLE child (id TEXT PRIMARY KEY, parent_id TEXT NOT NULL REFERENCES parent (id))`)
	exec(t, db, `INSERT INTO parent VALUES ('p', 'n')`)

	for name, tc := range map[string]struct {
		query    string
		extended storage.Code
	}{
		"primary key": {`INSERT INTO parent VALUES ('p', 'other')`, storage.CodeConstraint | 6<<8}, // SQLITE_CONSTRAINT_PRIMARYKEY
		"unique":      {`INSERT INTO parent VALUES ('q', 'n')`, storage.CodeConstraint | 8<<8},     // SQLITE_CONSTRAINT_UNIQUE
		"not null":    {`INSERT INTO child VALUES ('c', NULL)`, storage.CodeConstraint | 5<<8},     // SQLITE_CONSTRAINT_NOTNULL
		"foreign key": {`INSERT INTO child VALUES ('c', 'nobody')`, storage.CodeConstraint | 3<<8}, // SQLITE_CONSTRAINT_FOREIGNKEY: foreign_keys is on
	} {
		t.Run(name, func(t *testing.T) {
			var inner error
			err := db.Tx(ctx, func(tx storage.Tx) error {
				_, inner = tx.Exec(tc.query)
				return inner
			})
			require.Error(t, err)
			assert.Same(t, inner, err, "fn's error is returned unchanged")
			var se *storage.Error
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, storage.CodeConstraint)
			assert.Equal(t, tc.extended, storage.CodeOf(err), "the extended code is kept")
			assert.False(t, storage.IsTransient(err))
		})
	}
	assert.Equal(t, int64(1), count(t, db, "parent"))
	assert.Zero(t, count(t, db, "child"))
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

// holdWrite runs a write transaction on db that stays open until release is
// closed. It returns once the transaction holds the write lock, and a
// channel carrying the transaction's result.
func holdWrite(t *testing.T, db storage.DB, release <-chan struct{}) <-chan error {
	t.Helper()
	holding := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Tx(ctx, func(tx storage.Tx) error {
			if _, err := tx.Exec(`INSERT INTO v VALUES ('holder')`); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("holder failed: %v", err)
	}
	return done
}

// A second connection meets the first's write transaction as BUSY after its
// busy timeout, coded and transient; no transaction is left open on it, and
// it works once the first commits.
func TestBusyFromSecondConnection(t *testing.T) {
	first, path := newDB(t)
	exec(t, first, `CREATE TABLE v (who TEXT)`)
	second := openAt(t, path, sqlitedb.Options{BusyTimeout: 20 * time.Millisecond})

	release := make(chan struct{})
	held := holdWrite(t, first, release)
	ran := false
	err := second.Tx(ctx, func(tx storage.Tx) error {
		ran = true
		_, err := tx.Exec(`INSERT INTO v VALUES ('second')`)
		return err
	})
	require.Error(t, err)
	assert.False(t, ran, "BEGIN IMMEDIATE meets the lock before fn runs")
	assert.ErrorIs(t, err, storage.CodeBusy)
	assert.True(t, storage.IsTransient(err))

	close(release)
	require.NoError(t, <-held)
	exec(t, second, `INSERT INTO v VALUES ('second')`)
	assert.Equal(t, int64(2), count(t, first, "v"), "both writes landed, seen from the first connection")
	// The second connection holds no transaction: the first can write again.
	exec(t, first, `INSERT INTO v VALUES ('first again')`)
}

// The context bounds waiting for another connection's lock: a context that
// ends during the wait fails the transaction with an error that says so
// (never a bare, retryable BUSY), even with a long busy timeout.
func TestContextEndsBusyWait(t *testing.T) {
	first, path := newDB(t)
	exec(t, first, `CREATE TABLE v (who TEXT)`)
	second := openAt(t, path, sqlitedb.Options{}) // the default 5 s timeout

	release := make(chan struct{})
	held := holdWrite(t, first, release)
	wait, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := second.Tx(wait, func(tx storage.Tx) error { return nil })
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, storage.IsTransient(err), "a cancellation is never transient: %v", err)

	close(release)
	require.NoError(t, <-held)
	exec(t, second, `INSERT INTO v VALUES ('second')`)
	assert.Equal(t, int64(2), count(t, first, "v"))
}

func TestCancelledContextRunsNothing(t *testing.T) {
	db, _ := newDB(t)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	err := db.Tx(cancelled, func(tx storage.Tx) error { ran = true; return nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
}

func TestErrorFromFnRollsBack(t *testing.T) {
	db, path := newDB(t)
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	exec(t, db, `INSERT INTO v VALUES ('kept')`)
	sentinel := errors.New("changed my mind")
	err := db.Tx(ctx, func(tx storage.Tx) error {
		if _, err := tx.Exec(`INSERT INTO v VALUES ('dropped')`); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM v WHERE who = 'kept'`); err != nil {
			return err
		}
		return sentinel
	})
	assert.Same(t, sentinel, err, "fn's error is returned unchanged")
	rows := queryOne(t, db, `SELECT group_concat(who) FROM v`)
	assert.Equal(t, "kept", rows)
	// Nothing is left locked: another connection can write at once.
	other := openAt(t, path, sqlitedb.Options{BusyTimeout: time.Millisecond})
	exec(t, other, `INSERT INTO v VALUES ('other')`)
}

// A panic inside fn propagates, and the transaction does not outlive it:
// its writes are gone, the connection's next transaction works, and no
// write lock is left for another connection to meet.
func TestPanicInFnRollsBack(t *testing.T) {
	db, path := newDB(t)
	exec(t, db, `CREATE TABLE v (who TEXT)`)
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_ = db.Tx(ctx, func(tx storage.Tx) error {
			if _, err := tx.Exec(`INSERT INTO v VALUES ('panicked')`); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	other := openAt(t, path, sqlitedb.Options{BusyTimeout: time.Millisecond})
	exec(t, other, `INSERT INTO v VALUES ('other')`)
	exec(t, db, `INSERT INTO v VALUES ('same')`)
	assert.Equal(t, "other,same", queryOne(t, db, `SELECT group_concat(who, ',') FROM (SELECT who FROM v ORDER BY rowid)`))
}

func TestClosedDB(t *testing.T) {
	db, _ := newDB(t)
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "closing twice is harmless")
	err := db.Tx(ctx, func(tx storage.Tx) error { t.Fatal("fn ran on a closed DB"); return nil })
	assert.ErrorIs(t, err, sqlitedb.ErrClosed)
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
	held := holdWrite(t, openAt(t, path, sqlitedb.Options{}), release)
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
