package storagetest

import (
	"context"
	"errors"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
)

var txCases = []testCase{
	{"commits when fn returns nil", commitsOnNil},
	{"rolls back when fn returns an error", rollsBackOnError},
	{"rolls back when fn panics", rollsBackOnPanic},
	{"a cancelled context runs nothing", cancelledRunsNothing},
	{"a context ending inside fn cuts nothing short", contextEndingInsideFn},
	{"a failed transaction leaves the DB usable", usableAfterFailures},
	{"Exec reports the rows it changed", execCountsChangedRows},
}

// execCountsChangedRows: Exec's count is the rows the statement inserted,
// updated or deleted (SQLite's changes()), never index entries or rows a
// statement matched and left alone. Core decides on it (a claim is taken
// when exactly one row changed), and a host's count that included index
// writes (a Durable Object cursor's rowsWritten) would say 3 for one row.
func execCountsChangedRows(t conform.T, newDB NewDB) {
	db := newDB(t)
	exec(t, db, `CREATE TABLE c (id INTEGER PRIMARY KEY, k TEXT NOT NULL, n INTEGER NOT NULL)`)
	exec(t, db, `CREATE INDEX c_k ON c (k)`)
	exec(t, db, `CREATE INDEX c_n ON c (n)`)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		for _, c := range []struct {
			query string
			want  int64
		}{
			{`INSERT INTO c (k, n) VALUES ('a', 1)`, 1},
			{`INSERT INTO c (k, n) VALUES ('b', 2), ('c', 3)`, 2},
			{`UPDATE c SET k = k || 'x', n = n + 10 WHERE n >= 2`, 2},
			{`UPDATE c SET n = 0 WHERE k = 'none'`, 0},
			{`INSERT OR IGNORE INTO c (id, k, n) VALUES (1, 'dup', 0)`, 0},
			{`DELETE FROM c WHERE k = 'a'`, 1},
		} {
			n, err := tx.Exec(c.query)
			if err != nil {
				return err
			}
			assert.Equal(t, c.want, n, "%s", c.query)
		}
		return nil
	}))
}

func commitsOnNil(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		if _, err := tx.Exec(`INSERT INTO v VALUES ('a')`); err != nil {
			return err
		}
		// The transaction reads its own writes.
		found, err := storage.QueryRow(tx, `SELECT 1 FROM v WHERE who = 'a'`, nil, new(int64))
		assert.True(t, found, "a transaction sees its own insert")
		return err
	}))
	assert.Equal(t, "a", names(t, db), "committed")
}

// errChanged is a distinct error type, so the test can tell that fn's
// error comes back as fn returned it, not rebuilt or wrapped.
type errChanged struct{ why string }

func (e *errChanged) Error() string { return "changed my mind: " + e.why }

func rollsBackOnError(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	exec(t, db, `INSERT INTO v VALUES ('kept')`)
	mine := &errChanged{why: "test"}
	err := db.Tx(bg, func(tx storage.Tx) error {
		if _, err := tx.Exec(`INSERT INTO v VALUES ('dropped')`); err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM v WHERE who = 'kept'`); err != nil {
			return err
		}
		return mine
	})
	assert.Same(t, error(mine), err, "fn's error is returned unchanged")
	var as *errChanged
	assert.True(t, errors.As(err, &as), "errors.As finds fn's error")
	assert.False(t, storage.IsTransient(err), "fn's own error is not a storage failure")
	assert.Equal(t, "kept", names(t, db), "neither the insert nor the delete survived")
	noLockLeft(t, db)
}

// panicValue is what fn panics with: the recovered value must be it.
type panicValue struct{ n int }

func rollsBackOnPanic(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	recovered := func() (r any) {
		defer func() { r = recover() }()
		_ = db.Tx(bg, func(tx storage.Tx) error {
			if _, err := tx.Exec(`INSERT INTO v VALUES ('panicked')`); err != nil {
				return err
			}
			panic(panicValue{n: 7})
		})
		return nil
	}()
	assert.Equal(t, panicValue{n: 7}, recovered, "the panic goes on, unchanged")
	noLockLeft(t, db)
	exec(t, db, `INSERT INTO v VALUES ('next')`)
	assert.Equal(t, "next", names(t, db), "the panicked transaction left nothing, and the next one works")
}

// noLockLeft checks, where the DB has rivals, that another connection can
// write table v at once: no transaction outlived its Tx.
func noLockLeft(t conform.T, db storage.DB) {
	t.Helper()
	r, ok := db.(Rivals)
	if !ok {
		return
	}
	rival := r.Rival(t, shortWait)
	exec(t, rival, `INSERT INTO v VALUES ('rival')`)
	exec(t, rival, `DELETE FROM v WHERE who = 'rival'`)
}

func cancelledRunsNothing(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	for name, ctx := range map[string]context.Context{
		"cancelled":      cancelled(),
		"past deadline":  pastDeadline(t),
		"cause attached": cancelledWithCause(),
	} {
		ran := false
		err := db.Tx(ctx, func(tx storage.Tx) error {
			ran = true
			_, err := tx.Exec(`INSERT INTO v VALUES (?)`, name)
			return err
		})
		assert.ErrorIs(t, err, ctx.Err(), name)
		assert.False(t, ran, "%s: fn ran", name)
		assert.False(t, storage.IsTransient(err), "%s: a cancellation is never transient", name)
	}
	assert.Equal(t, "", names(t, db))
}

// contextEndingInsideFn: the context bounds the wait for the database,
// not the transaction once it holds it. A context that ends while fn runs
// (a client hanging up, an instance told to stop) fails none of fn's
// statements and not the commit: fn decides, as it would on every host.
// A host that bound them to the context would roll back, on one host
// only, work core took as done.
func contextEndingInsideFn(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	err := db.Tx(ctx, func(tx storage.Tx) error {
		if _, err := tx.Exec(`INSERT INTO v VALUES ('before')`); err != nil {
			return err
		}
		cancel()
		if _, err := tx.Exec(`INSERT INTO v VALUES ('after')`); err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT count(*) FROM v`)
		if err != nil {
			return err
		}
		assert.Equal(t, [][]any{{int64(2)}}, rows.Values, "a query after the context ended")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, "before,after", names(t, db))
}

var unixEpoch = time.Unix(0, 0)

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	return ctx
}

func cancelledWithCause() context.Context {
	ctx, cancel := context.WithCancelCause(bg)
	cancel(errors.New("instance stopping"))
	return ctx
}

func pastDeadline(t conform.T) context.Context {
	ctx, cancel := context.WithDeadline(bg, unixEpoch)
	t.Cleanup(cancel)
	return ctx
}

// usableAfterFailures runs one failure of each kind, then a transaction
// that must commit: no failure leaves a transaction open or the
// connection unusable.
func usableAfterFailures(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	exec(t, db, `CREATE UNIQUE INDEX v_who ON v (who)`)
	exec(t, db, `INSERT INTO v VALUES ('a')`)
	failures := map[string]func(tx storage.Tx) error{
		"fn's error": func(tx storage.Tx) error {
			_, _ = tx.Exec(`INSERT INTO v VALUES ('b')`)
			return errors.New("no")
		},
		"a syntax error": func(tx storage.Tx) error {
			_, err := tx.Exec(`INSERT INTO v VALUES ('b'`)
			return err
		},
		"a constraint violation": func(tx storage.Tx) error {
			_, err := tx.Exec(`INSERT INTO v VALUES ('a')`)
			return err
		},
		"an unknown table": func(tx storage.Tx) error {
			_, err := tx.Query(`SELECT * FROM nowhere`)
			return err
		},
	}
	for name, fail := range failures {
		require.Error(t, db.Tx(bg, fail), name)
		exec(t, db, `INSERT INTO v VALUES (?)`, "after "+name)
		exec(t, db, `DELETE FROM v WHERE who = ?`, "after "+name)
	}
	assert.Equal(t, "a", names(t, db))
}
