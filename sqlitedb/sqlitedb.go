package sqlitedb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core/storage"
)

// DefaultBusyTimeout is how long a statement waits for another connection's
// lock before failing with BUSY.
const DefaultBusyTimeout = 5 * time.Second

// Options tune Open. The zero value is the default: what a server runs.
type Options struct {
	// BusyTimeout is how long a statement waits for another connection's
	// lock. Zero: DefaultBusyTimeout. Negative: no wait, BUSY at once (the
	// simulator runs competing connections on one goroutine, where waiting
	// cannot end a conflict).
	BusyTimeout time.Duration
	// VFS names a registered SQLite VFS to open the file through (a test's
	// fault-injecting one, internal/faultvfs). Empty: the OS VFS, creating
	// the database's files (the database, its journal, its WAL and the
	// WAL's shared memory) 0600, for their owner only (private.go); a
	// named VFS creates them as it does.
	VFS string
	// NoSync sets synchronous=OFF instead of FULL: commits are not flushed
	// to disk, so they survive the death of the process but not of the
	// machine. For the simulator, whose kills are process deaths (DESIGN
	// §14); never for data that must survive power loss.
	NoSync bool
	// Hooks observe the DB's transactions, through Tx and Conn alike.
	Hooks Hooks
}

// Hooks observe transactions, for a simulator that judges every commit at
// its connection. Each is optional.
type Hooks struct {
	// Begin is called inside each transaction, just after its BEGIN
	// succeeded, with the DB's lock held: it must not call Tx, but a
	// Conn's hook may run statements on the Conn (they join the
	// transaction).
	Begin func()
	// Commit is called after each COMMIT that succeeded, once the
	// transaction has ended and the lock is released, with the number of
	// rows the transaction inserted, updated or deleted.
	Commit func(changes int64)
}

// DB is a storage.DB over one SQLite connection.
type DB struct {
	mu      sync.Mutex
	conn    *sqlite3.Conn
	stmts   map[string]*sqlite3.Stmt
	path    string
	hooks   Hooks
	changes int64 // the connection's total changes when the open transaction began
}

var _ storage.DB = (*DB)(nil)

// Open opens (creating if needed) the database file at path with revenant's
// settings. It does not migrate: core does that through the contract.
func Open(path string, opts Options) (*DB, error) {
	vfsName := opts.VFS
	// A "file:" URI is the caller's whole name, its VFS too (a test's
	// lock-free one): opened as given.
	if vfsName == "" && path != ":memory:" && path != "" && !strings.HasPrefix(path, "file:") {
		registerPrivate()
		vfsName = privateName
	}
	name, err := fileName(path, vfsName)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	conn, err := sqlite3.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, mapErr(err))
	}
	db := &DB{conn: conn, stmts: map[string]*sqlite3.Stmt{}, path: path, hooks: opts.Hooks}
	if err := db.configure(opts); err != nil {
		conn.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// fileName is what SQLite opens: path itself, or with a VFS a URI filename
// (only a URI can name one). The URI's path is absolute, because a relative
// one would read as an authority, and escaped, so that no character of it
// reads as a query.
func fileName(path, vfs string) (string, error) {
	if vfs == "" {
		return path, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: "vfs=" + url.QueryEscape(vfs)}).String(), nil
}

func (db *DB) configure(opts Options) error {
	timeout := opts.BusyTimeout
	switch {
	case timeout == 0:
		timeout = DefaultBusyTimeout
	case timeout < 0:
		timeout = 0
	}
	if err := db.conn.BusyTimeout(timeout); err != nil {
		return fmt.Errorf("set busy timeout: %w", mapErr(err))
	}
	mode, err := db.pragma("PRAGMA journal_mode=WAL")
	if err != nil {
		return fmt.Errorf("set journal mode: %w", err)
	}
	if mode != "wal" {
		// SQLite keeps a temporary or in-memory database (an empty path,
		// ":memory:", mode=memory) out of WAL, which durability needs.
		return fmt.Errorf("set journal mode: database reports %q, want wal: revenant needs a database file (not an empty path, :memory: or mode=memory)", mode)
	}
	sync, want := "PRAGMA synchronous=FULL", "2"
	if opts.NoSync {
		sync, want = "PRAGMA synchronous=OFF", "0"
	}
	for _, p := range []string{sync, "PRAGMA foreign_keys=ON"} {
		if err := db.conn.Exec(p); err != nil {
			return fmt.Errorf("%s: %w", p, mapErr(err))
		}
	}
	if v, err := db.pragma("PRAGMA synchronous"); err != nil || v != want {
		return fmt.Errorf("read back synchronous: got %q, want %s: %v", v, want, err)
	}
	// No other database file may be opened through this connection:
	// revenant's SQL never attaches one, and a wasm guest's statements are
	// run here as it sends them, so ATTACH (and VACUUM INTO, which attaches
	// its target) would let a guest open or write any path the host can.
	db.conn.Limit(sqlite3.LIMIT_ATTACHED, 0)
	return nil
}

func (db *DB) pragma(q string) (string, error) {
	stmt, _, err := db.conn.Prepare(q)
	if err != nil {
		return "", mapErr(err)
	}
	defer stmt.Close()
	if !stmt.Step() {
		return "", mapErr(stmt.Err())
	}
	return stmt.ColumnText(0), nil
}

// Path is the file this DB was opened on.
func (db *DB) Path() string { return db.path }

// Close closes the connection. Pending statements are finalized first.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.closeLocked()
}

// closeLocked closes the connection; the caller holds db.mu. SQLite rolls
// back a transaction left open, as at the death of a process.
func (db *DB) closeLocked() error {
	if db.conn == nil {
		return nil
	}
	for q, s := range db.stmts {
		s.Close()
		delete(db.stmts, q)
	}
	err := db.conn.Close()
	db.conn = nil
	return mapErr(err)
}

// ErrClosed is returned by Tx on a closed DB. It is storage.ErrClosed, so
// core and the API recognise it without importing this package.
var ErrClosed = storage.ErrClosed

// Tx implements storage.DB.
func (db *DB) Tx(ctx context.Context, fn func(storage.Tx) error) (err error) {
	committed := int64(-1) // the commit's changes, once it succeeded
	// Registered before the unlock, so it runs after it: the Commit hook
	// hears of the commit with the lock released.
	defer func() { db.afterCommit(committed) }()
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.conn == nil {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// ctx bounds the wait for the write lock (BEGIN IMMEDIATE's busy
	// handling), and only that: once the transaction holds the lock, fn's
	// statements and the commit run to their end, as storage.DB says and
	// every other host does. A context that ends mid-fn (a client hanging
	// up) must not roll back here what the guest's or the Durable
	// Object's storage would commit.
	old := db.conn.SetInterrupt(ctx)
	err = db.conn.Exec("BEGIN IMMEDIATE")
	db.conn.SetInterrupt(old)
	if err != nil {
		db.rollbackIfOpen()
		return fmt.Errorf("begin: %w", failure(ctx, err))
	}
	// Whatever way fn leaves (an error, a panic), no transaction outlives
	// Tx: an open one would keep the write lock from every other connection.
	defer db.rollbackIfOpen()
	db.begun()
	if err := fn(tx{db}); err != nil {
		return err
	}
	if err := db.conn.Exec("COMMIT"); err != nil {
		// A COMMIT that fails with BUSY leaves the transaction open; the
		// deferred rollback makes the connection usable and the caller may
		// rerun it.
		return fmt.Errorf("commit: %w", mapErr(err))
	}
	committed = db.changed()
	return nil
}

// begun notes the start of a transaction (BEGIN succeeded) for the hooks;
// the caller holds db.mu.
func (db *DB) begun() {
	if db.hooks.Commit != nil {
		db.changes = db.conn.TotalChanges()
	}
	if db.hooks.Begin != nil {
		db.hooks.Begin()
	}
}

// changed is how many rows the transaction that just committed changed;
// the caller holds db.mu. Without a Commit hook nobody asks: 0.
func (db *DB) changed() int64 {
	if db.hooks.Commit == nil {
		return 0
	}
	return db.conn.TotalChanges() - db.changes
}

// afterCommit tells the Commit hook of a commit that changed n rows; n < 0
// means there was none. The caller does not hold db.mu.
func (db *DB) afterCommit(n int64) {
	if n >= 0 && db.hooks.Commit != nil {
		db.hooks.Commit(n)
	}
}

// failure maps a BEGIN error. When ctx has ended it also carries ctx's
// error: the end of ctx cuts a busy wait short with a plain BUSY, which
// must read as a cancellation, never as a transient failure to retry.
func failure(ctx context.Context, err error) error {
	err = mapErr(err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", err, cerr)
	}
	return err
}

// rollbackIfOpen rolls back the connection's open transaction, if any. The
// caller's context is set aside for it: a cancelled context must not
// interrupt the rollback that cleans up after it.
func (db *DB) rollbackIfOpen() {
	if !db.conn.GetAutocommit() {
		prev := db.conn.SetInterrupt(context.Background())
		_ = db.conn.Exec("ROLLBACK")
		db.conn.SetInterrupt(prev)
	}
}

type tx struct{ db *DB }

func (t tx) stmt(query string, args []any) (*sqlite3.Stmt, error) {
	s, ok := t.db.stmts[query]
	if !ok {
		var tail string
		var err error
		s, tail, err = t.db.conn.Prepare(query)
		if err != nil {
			return nil, mapErr(err)
		}
		if s == nil { // only white space or comments: SQLite prepares nothing
			return nil, fmt.Errorf("prepare: no statement in %q", query)
		}
		if tail != "" {
			s.Close()
			return nil, fmt.Errorf("prepare: more than one statement in %q", query)
		}
		t.db.stmts[query] = s
	}
	if err := Bind(s, args); err != nil {
		s.ClearBindings()
		return nil, err
	}
	return s, nil
}

func done(s *sqlite3.Stmt) {
	s.Reset()
	s.ClearBindings()
}

// Exec implements storage.Tx.
func (t tx) Exec(query string, args ...any) (int64, error) {
	s, err := t.stmt(query, args)
	if err != nil {
		return 0, err
	}
	defer done(s)
	before := t.db.conn.TotalChanges()
	for s.Step() {
	}
	if err := s.Err(); err != nil {
		return 0, mapErr(err)
	}
	// SQLite's changes() is the last INSERT, UPDATE or DELETE's count, so
	// after any other statement (CREATE, a pragma) it is a stale one: a
	// statement that changed nothing left the total where it was.
	if t.db.conn.TotalChanges() == before {
		return 0, nil
	}
	return t.db.conn.Changes(), nil
}

// Query implements storage.Tx.
func (t tx) Query(query string, args ...any) (*storage.Rows, error) {
	s, err := t.stmt(query, args)
	if err != nil {
		return nil, err
	}
	defer done(s)
	return ReadRows(s)
}

// StorageError turns an error from ncruces into a *storage.Error carrying
// SQLite's extended code, so core classifies it by code
// (errors.Is(err, storage.CodeBusy), storage.IsTransient); the ncruces
// value stays reachable with errors.Is. Any other error is returned as is.
// Every connection over ncruces (a guest's, the simulator's) should map its
// failures with it: ncruces reports most failures, FULL and BUSY among
// them, as a bare sqlite3.ExtendedErrorCode rather than a *sqlite3.Error.
func StorageError(err error) error { return mapErr(err) }

// mapErr is StorageError.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite3.Error
	if errors.As(err, &se) {
		return &storage.Error{Code: storage.Code(se.ExtendedCode()), Msg: se.Error(), Err: err}
	}
	// The extended code first: a bare sqlite3.ExtendedErrorCode (ncruces
	// returns one for I/O failures) also converts to its primary
	// sqlite3.ErrorCode, which would lose the detail. A primary code converts
	// to an extended one of the same value, so this catches both.
	var ext sqlite3.ExtendedErrorCode
	if errors.As(err, &ext) {
		return &storage.Error{Code: storage.Code(ext), Msg: ext.Error(), Err: err}
	}
	return err
}
