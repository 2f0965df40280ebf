package check

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
)

// openReadOnly opens a tree database so that nothing the checker does can
// change what it judges: SQLite refuses every write on the connection.
func openReadOnly(path string) (*sqlite3.Conn, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s read-only: %w", path, err)
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro"}
	conn, err := sqlite3.OpenFlags(u.String(), sqlite3.OPEN_READONLY|sqlite3.OPEN_URI)
	if err != nil {
		return nil, fmt.Errorf("open %s read-only: %w", path, err)
	}
	return conn, nil
}

// conn adapts one ncruces connection to core's storage contract, for the
// read-only judged file and for the private in-memory rebuild. Unlike
// sqlitedb it sets no pragmas: the judged file must be read as it is,
// and the in-memory copy needs no durability.
type conn struct{ c *sqlite3.Conn }

var _ storage.DB = conn{}

// Tx implements storage.DB. BEGIN DEFERRED takes no lock up front, which a
// read-only connection could not.
func (db conn) Tx(_ context.Context, fn func(storage.Tx) error) error {
	if err := db.c.Exec("BEGIN"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(db); err != nil {
		_ = db.c.Exec("ROLLBACK")
		return err
	}
	if err := db.c.Exec("COMMIT"); err != nil {
		_ = db.c.Exec("ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Exec implements storage.Tx.
func (db conn) Exec(query string, args ...any) (int64, error) {
	s, err := db.prepare(query, args)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	for s.Step() {
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return db.c.Changes(), nil
}

// Query implements storage.Tx.
func (db conn) Query(query string, args ...any) (*storage.Rows, error) {
	s, err := db.prepare(query, args)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return sqlitedb.ReadRows(s)
}

func (db conn) prepare(query string, args []any) (*sqlite3.Stmt, error) {
	s, tail, err := db.c.Prepare(query)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", query, err)
	}
	if tail != "" {
		s.Close()
		return nil, fmt.Errorf("prepare: more than one statement in %q", query)
	}
	if err := sqlitedb.Bind(s, args); err != nil {
		s.Close()
		return nil, fmt.Errorf("prepare %q: %w", query, err)
	}
	return s, nil
}
