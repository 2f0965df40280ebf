package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
)

// NewDB opens a fresh, empty database for one test of the suite. Whatever
// it opens it closes through t.Cleanup.
type NewDB func(t conform.T) storage.DB

// Rivals is the capability to provoke BUSY: the DB under test opens another
// connection of the same implementation to its own database.
type Rivals interface {
	// Rival opens another connection to the same database whose busy wait
	// (how long a transaction waits for another connection's lock before
	// failing with BUSY) is wait. It is closed by a cleanup of t.
	Rival(t conform.T, wait time.Duration) storage.DB
}

// CommitFaults is the capability to make a COMMIT fail the way SQLite
// fails one it could not finish for a lock: with the error's code, and the
// transaction still open on the connection (DESIGN §8: "a BUSY past the
// busy timeout leaves the transaction open: roll back before retrying").
type CommitFaults interface {
	// FailNextCommit makes the next COMMIT that wrote something fail with
	// code. Statements before it are not affected.
	FailNextCommit(code storage.Code)
}

// Closer is the capability to close the DB; a closed DB's Tx fails with
// storage.ErrClosed and runs nothing.
type Closer interface {
	Close() error
}

// Skip excuses the DB under test from one test of the suite, named as the
// suite names it ("busy/the context ends a busy wait"), for a documented
// reason.
type Skip struct {
	Test string
	Why  string
}

// Run runs the suite on t against databases newDB opens.
func Run(t *testing.T, newDB NewDB, skips ...Skip) {
	RunT(conform.Wrap(t), newDB, skips...)
}

// RunT is Run on any conform.T (a conform.Recorder, to check the suite
// catches a broken DB).
func RunT(t conform.T, newDB NewDB, skips ...Skip) {
	s := &suite{newDB: newDB, skips: map[string]string{}, used: map[string]bool{}}
	for _, sk := range skips {
		s.skips[sk.Test] = sk.Why
	}
	for _, g := range groups {
		t.Run(g.name, func(t conform.T) {
			for _, c := range g.cases {
				name := g.name + "/" + c.name
				t.Run(c.name, func(t conform.T) {
					if why, ok := s.skips[name]; ok {
						s.used[name] = true
						t.Skip("excused: " + why)
					}
					c.run(t, s.newDB)
				})
			}
		})
	}
	for name := range s.skips {
		if !s.used[name] {
			t.Errorf("storagetest: Skip %q names no test of the suite", name)
		}
	}
}

type suite struct {
	newDB NewDB
	skips map[string]string
	used  map[string]bool
}

// testCase is one invariant, run on a fresh database.
type testCase struct {
	name string
	run  func(t conform.T, newDB NewDB)
}

type group struct {
	name  string
	cases []testCase
}

// groups are the suite's tests, in the order they run.
var groups = []group{
	{"tx", txCases},
	{"values", valueCases},
	{"errors", errorCases},
	{"busy", busyCases},
	{"commit", commitCases},
	{"closed", closedCases},
}

var bg = context.Background()

// exec runs one statement in a transaction of its own and requires it to
// succeed.
func exec(t conform.T, db storage.DB, query string, args ...any) {
	t.Helper()
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		_, err := tx.Exec(query, args...)
		return err
	}), "exec %s", query)
}

// one returns the single value of query's first row.
func one(t conform.T, db storage.DB, query string, args ...any) any {
	t.Helper()
	var v any
	found := false
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		var err error
		found, err = storage.QueryRow(tx, query, args, &v)
		return err
	}), "query %s", query)
	require.True(t, found, "%s returned no row", query)
	return v
}

// names lists table v's column who, in insertion order, comma-separated
// ("" for none).
func names(t conform.T, db storage.DB) string {
	t.Helper()
	v := one(t, db, `SELECT coalesce(group_concat(who, ','), '') FROM (SELECT who FROM v ORDER BY rowid)`)
	s, ok := v.(string)
	require.True(t, ok, "group_concat returned %T", v)
	return s
}

// createV makes the table most tests write: v (who TEXT).
const createV = `CREATE TABLE v (who TEXT)`

// withV opens a database holding table v.
func withV(t conform.T, newDB NewDB) storage.DB {
	t.Helper()
	db := newDB(t)
	exec(t, db, createV)
	return db
}

// Hold runs on db a transaction that executes write and then stays open
// until release is closed. It returns once the write is done (so db holds
// the write lock) and a channel that carries the transaction's result.
func Hold(t conform.T, db storage.DB, write string, release <-chan struct{}) <-chan error {
	t.Helper()
	holding := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Tx(bg, func(tx storage.Tx) error {
			if _, err := tx.Exec(write); err != nil {
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
		require.NoError(t, err, "the holder's transaction failed")
		require.Fail(t, "the holder's transaction ended without holding")
	}
	return done
}
