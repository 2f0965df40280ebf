package storagetest

import (
	"context"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
)

var busyCases = []testCase{
	{"BUSY past the busy wait is coded and transient", busyIsTransient},
	{"the context ends a busy wait", contextEndsBusyWait},
}

var commitCases = []testCase{
	{"a failed commit left open is rolled back before the next transaction", failedCommitRolledBack},
}

var closedCases = []testCase{
	{"a closed DB refuses with ErrClosed", closedRefuses},
}

// shortWait is a rival's busy wait when the test wants it to give up;
// longWait when only the context may end the wait.
const (
	shortWait = 10 * time.Millisecond
	longWait  = time.Minute
)

func rivals(t conform.T, db storage.DB) Rivals {
	r, ok := db.(Rivals)
	if !ok {
		t.Skip("the DB has no Rivals capability: it cannot provoke BUSY")
	}
	return r
}

// busyIsTransient: a connection that meets another's write lock past its
// busy wait fails with BUSY, coded and transient; it stores nothing, holds
// nothing afterwards, and the same transaction succeeds once the lock is
// gone.
func busyIsTransient(t conform.T, newDB NewDB) {
	db := newDB(t)
	r := rivals(t, db)
	exec(t, db, createV)
	rival := r.Rival(t, shortWait)

	release := make(chan struct{})
	held := Hold(t, db, `INSERT INTO v VALUES ('holder')`, release)
	write := func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO v VALUES ('rival')`)
		return err
	}
	err := rival.Tx(bg, write)
	close(release)
	require.NoError(t, <-held)
	require.Error(t, err)
	assert.ErrorIs(t, err, storage.CodeBusy)
	assert.True(t, storage.IsTransient(err), "%v", err)

	exec(t, db, `INSERT INTO v VALUES ('holder again')`) // the rival holds no lock
	require.NoError(t, rival.Tx(bg, write), "the rerun succeeds")
	assert.Equal(t, "holder,holder again,rival", names(t, db))
}

// contextEndsBusyWait: the context bounds the wait for another
// connection's lock. A wait it ends fails with the context's error, never
// a bare (retryable) BUSY, however long the busy wait.
func contextEndsBusyWait(t conform.T, newDB NewDB) {
	db := newDB(t)
	r := rivals(t, db)
	exec(t, db, createV)
	rival := r.Rival(t, longWait)

	release := make(chan struct{})
	held := Hold(t, db, `INSERT INTO v VALUES ('holder')`, release)
	// The deadline only has to fall inside the wait; the assertions do not
	// depend on when.
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	err := rival.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO v VALUES ('rival')`)
		return err
	})
	close(release)
	require.NoError(t, <-held)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, storage.IsTransient(err), "a cancellation is never transient: %v", err)

	exec(t, rival, `INSERT INTO v VALUES ('rival')`)
	assert.Equal(t, "holder,rival", names(t, db))
}

// failedCommitRolledBack: a COMMIT that fails and leaves its transaction
// open (SQLite's BUSY) returns its code, and the DB rolls the transaction
// back: its writes are gone, the next transaction runs, and no lock is left
// for another connection.
func failedCommitRolledBack(t conform.T, newDB NewDB) {
	db := newDB(t)
	faults, ok := db.(CommitFaults)
	if !ok {
		t.Skip("the DB has no CommitFaults capability")
	}
	exec(t, db, createV)
	exec(t, db, `INSERT INTO v VALUES ('before')`)
	write := func(who string) func(tx storage.Tx) error {
		return func(tx storage.Tx) error {
			_, err := tx.Exec(`INSERT INTO v VALUES (?)`, who)
			return err
		}
	}
	faults.FailNextCommit(storage.CodeBusy)
	err := db.Tx(bg, write("lost"))
	require.Error(t, err)
	assert.ErrorIs(t, err, storage.CodeBusy)
	assert.True(t, storage.IsTransient(err), "%v", err)

	if r, ok := db.(Rivals); ok {
		rival := r.Rival(t, shortWait)
		require.NoError(t, rival.Tx(bg, write("rival")), "the failed transaction holds no lock")
	}
	require.NoError(t, db.Tx(bg, write("retried")), "the retry runs")
	got := names(t, db)
	assert.Contains(t, []string{"before,retried", "before,rival,retried"}, got, "the failed commit's write is gone")
}

func closedRefuses(t conform.T, newDB NewDB) {
	db := newDB(t)
	c, ok := db.(Closer)
	if !ok {
		t.Skip("the DB has no Closer capability")
	}
	exec(t, db, createV)
	require.NoError(t, c.Close())
	ran := false
	err := db.Tx(bg, func(tx storage.Tx) error { ran = true; return nil })
	assert.ErrorIs(t, err, storage.ErrClosed)
	assert.False(t, ran, "fn ran on a closed DB")
	assert.False(t, storage.IsTransient(err), "a closed DB is not a storage failure to retry")
}
