package sqlitedb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core/storage"
)

// DefaultBusyTimeout is how long a statement waits for another connection's
// lock before failing with BUSY.
const DefaultBusyTimeout = 5 * time.Second

// Options tune Open. The zero value is the default.
type Options struct {
	// BusyTimeout overrides DefaultBusyTimeout when positive.
	BusyTimeout time.Duration
	// VFS names a registered SQLite VFS to open the file through (a test's
	// fault-injecting one, internal/faultvfs). Empty: the OS VFS.
	VFS string
}

// DB is a storage.DB over one SQLite connection.
type DB struct {
	mu    sync.Mutex
	conn  *sqlite3.Conn
	stmts map[string]*sqlite3.Stmt
	path  string
}

var _ storage.DB = (*DB)(nil)

// Open opens (creating if needed) the database file at path with revenant's
// settings. It does not migrate: core does that through the contract.
func Open(path string, opts Options) (*DB, error) {
	name := path
	if opts.VFS != "" {
		// Only a URI filename can name a VFS; the path is escaped so that no
		// character of it reads as a query.
		name = (&url.URL{Scheme: "file", Path: path, RawQuery: "vfs=" + url.QueryEscape(opts.VFS)}).String()
	}
	conn, err := sqlite3.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, mapErr(err))
	}
	db := &DB{conn: conn, stmts: map[string]*sqlite3.Stmt{}, path: path}
	if err := db.configure(opts); err != nil {
		conn.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

func (db *DB) configure(opts Options) error {
	timeout := opts.BusyTimeout
	if timeout <= 0 {
		timeout = DefaultBusyTimeout
	}
	if err := db.conn.BusyTimeout(timeout); err != nil {
		return fmt.Errorf("set busy timeout: %w", mapErr(err))
	}
	mode, err := db.pragma("PRAGMA journal_mode=WAL")
	if err != nil {
		return fmt.Errorf("set journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("set journal mode: database reports %q, want wal", mode)
	}
	for _, p := range []string{"PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"} {
		if err := db.conn.Exec(p); err != nil {
			return fmt.Errorf("%s: %w", p, mapErr(err))
		}
	}
	if v, err := db.pragma("PRAGMA synchronous"); err != nil || v != "2" {
		return fmt.Errorf("read back synchronous: got %q: %v", v, err)
	}
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
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.conn == nil {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	old := db.conn.SetInterrupt(ctx)
	defer db.conn.SetInterrupt(old)

	if err := db.conn.Exec("BEGIN IMMEDIATE"); err != nil {
		db.rollbackIfOpen()
		return fmt.Errorf("begin: %w", failure(ctx, err))
	}
	// Whatever way fn leaves (an error, a panic), no transaction outlives
	// Tx: an open one would keep the write lock from every other connection.
	defer db.rollbackIfOpen()
	if err := fn(tx{db}); err != nil {
		return err
	}
	if err := db.conn.Exec("COMMIT"); err != nil {
		// A COMMIT that fails with BUSY leaves the transaction open; the
		// deferred rollback makes the connection usable and the caller may
		// rerun it.
		return fmt.Errorf("commit: %w", failure(ctx, err))
	}
	return nil
}

// failure maps a BEGIN or COMMIT error. When ctx has ended it also carries
// ctx's error: the end of ctx cuts a busy wait short with a plain BUSY, which
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
	for s.Step() {
	}
	if err := s.Err(); err != nil {
		return 0, mapErr(err)
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
