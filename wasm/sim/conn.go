package sim

import (
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// conn is the host-owned connection of one guest: a process of its own, in
// the simulator's model. A kill closes it (SQLite rolls back whatever
// transaction the guest left open, as the death of a process would); a
// zombie keeps its own while its successor boots on a new one.
//
// synchronous=OFF: the nemesis kills processes, not machines, and a killed
// process loses nothing the operating system already has; fsync would only
// make the campaign slower.
type conn struct {
	c     *sqlite3.Conn
	stmts map[string]*sqlite3.Stmt
	// onBegin and onCommit, when set, hear of every transaction begun and
	// of every commit that changed rows (how many), whether or not the
	// guest emits anything after it.
	onBegin  func()
	onCommit func(changes int64)
	changes  int64 // TotalChanges when the transaction began
}

var _ runtime.Conn = (*conn)(nil)

// openConn opens the tree's file, through the named VFS when vfs is not
// empty (the tree's disk-full fault).
func openConn(path, vfs string) (*conn, error) {
	name := path
	if vfs != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		name = (&url.URL{Scheme: "file", Path: abs, RawQuery: "vfs=" + url.QueryEscape(vfs)}).String()
	}
	c, err := sqlite3.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	for _, p := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=OFF", "PRAGMA busy_timeout=0"} {
		if err := c.Exec(p); err != nil {
			c.Close()
			return nil, fmt.Errorf("open %s: %s: %w", path, p, err)
		}
	}
	return &conn{c: c, stmts: map[string]*sqlite3.Stmt{}}, nil
}

func (c *conn) close() error {
	for _, s := range c.stmts {
		s.Close()
	}
	c.stmts = nil
	return c.c.Close()
}

// Begin implements runtime.Conn.
func (c *conn) Begin() error {
	if err := c.c.Exec("BEGIN IMMEDIATE"); err != nil {
		return mapErr(err)
	}
	c.changes = c.c.TotalChanges()
	if c.onBegin != nil {
		c.onBegin()
	}
	return nil
}

// Commit implements runtime.Conn.
func (c *conn) Commit() error {
	if err := c.c.Exec("COMMIT"); err != nil {
		return mapErr(err)
	}
	if n := c.c.TotalChanges() - c.changes; n > 0 && c.onCommit != nil {
		c.onCommit(n)
	}
	return nil
}

// Rollback implements runtime.Conn.
func (c *conn) Rollback() error {
	if c.c.GetAutocommit() {
		return nil
	}
	return mapErr(c.c.Exec("ROLLBACK"))
}

// InTx implements runtime.Conn.
func (c *conn) InTx() bool { return !c.c.GetAutocommit() }

// Exec implements runtime.Conn.
func (c *conn) Exec(query string, args []any) (int64, error) {
	s, err := c.stmt(query, args)
	if err != nil {
		return 0, err
	}
	defer reset(s)
	for s.Step() {
	}
	if err := s.Err(); err != nil {
		return 0, mapErr(err)
	}
	return c.c.Changes(), nil
}

// Query implements runtime.Conn.
func (c *conn) Query(query string, args []any) (*storage.Rows, error) {
	s, err := c.stmt(query, args)
	if err != nil {
		return nil, err
	}
	defer reset(s)
	return sqlitedb.ReadRows(s)
}

func reset(s *sqlite3.Stmt) {
	s.Reset()
	s.ClearBindings()
}

func (c *conn) stmt(query string, args []any) (*sqlite3.Stmt, error) {
	s, ok := c.stmts[query]
	if !ok {
		var tail string
		var err error
		s, tail, err = c.c.Prepare(query)
		if err != nil {
			return nil, mapErr(err)
		}
		if tail != "" {
			s.Close()
			return nil, fmt.Errorf("prepare: more than one statement in %q", query)
		}
		c.stmts[query] = s
	}
	if err := sqlitedb.Bind(s, args); err != nil {
		s.ClearBindings()
		return nil, err
	}
	return s, nil
}

// mapErr carries SQLite's extended code across as a *storage.Error, which
// is what the guest classifies transient failures by.
func mapErr(err error) error { return sqlitedb.StorageError(err) }
