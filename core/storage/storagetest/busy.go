package storagetest

import (
	"context"
	"fmt"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
)

var busyCases = []testCase{
	{"BUSY past the busy wait is coded and transient", busyIsTransient},
	{"the context ends a busy wait", contextEndsBusyWait},
	{"a rival commits nothing between a transaction's read and its write", readThenWriteIsolated},
}

var commitCases = []testCase{
	{"a failed commit left open is rolled back before the next transaction", failedCommitRolledBack},
	{"a commit failing after the context ended is the storage's failure", commitFailsAfterContextEnded},
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

// withRival opens a database holding table v and a rival connection to it
// with busy wait wait, or skips the test if the DB has no rivals.
func withRival(t conform.T, newDB NewDB, wait time.Duration) (db, rival storage.DB) {
	t.Helper()
	db, r := withCapability[Rivals](t, newDB)
	return db, r.Rival(t, wait)
}

// withCapability opens a database holding table v whose DB has capability
// C, or skips the test: a capability is checked before any statement, so a
// DB without it skips whatever else it cannot do.
func withCapability[C any](t conform.T, newDB NewDB) (storage.DB, C) {
	t.Helper()
	db := newDB(t)
	c, ok := db.(C)
	if !ok {
		t.Skip(fmt.Sprintf("the DB has no %T capability", (*C)(nil)))
	}
	exec(t, db, createV)
	return db, c
}

// whileHeld runs attempt while db holds the write lock (its transaction
// has inserted 'holder' into v), then lets that transaction commit, and
// returns attempt's error.
func whileHeld(t conform.T, db storage.DB, attempt func() error) error {
	t.Helper()
	release := make(chan struct{})
	held := Hold(t, db, `INSERT INTO v VALUES ('holder')`, release)
	err := attempt()
	close(release)
	require.NoError(t, <-held, "the holder's commit")
	return err
}

// busyIsTransient: a connection that meets another's write lock past its
// busy wait fails with BUSY, coded and transient; it stores nothing, holds
// nothing afterwards, and the same transaction succeeds once the lock is
// gone.
func busyIsTransient(t conform.T, newDB NewDB) {
	db, rival := withRival(t, newDB, shortWait)
	write := func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO v VALUES ('rival')`)
		return err
	}
	err := whileHeld(t, db, func() error { return rival.Tx(bg, write) })
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
	db, rival := withRival(t, newDB, longWait)
	// The deadline only has to fall inside the wait; the assertions do not
	// depend on when.
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	err := whileHeld(t, db, func() error {
		return rival.Tx(ctx, func(tx storage.Tx) error {
			_, err := tx.Exec(`INSERT INTO v VALUES ('rival')`)
			return err
		})
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, storage.IsTransient(err), "a cancellation is never transient: %v", err)

	exec(t, rival, `INSERT INTO v VALUES ('rival')`)
	assert.Equal(t, "holder,rival", names(t, db))
}

// readThenWriteIsolated: what a transaction read still holds when it
// writes. Core's fences (DESIGN §6.2) read the tree's epoch and the
// session's claim and then write in the same transaction; a newer
// instance's commit landing between the two would let a superseded
// instance write. Either the rival waits out the transaction (its busy
// wait ends in BUSY) or the transaction that read before the rival's
// commit fails; never do both commit.
func readThenWriteIsolated(t conform.T, newDB NewDB) {
	db, rival := withRival(t, newDB, shortWait)
	exec(t, db, `INSERT INTO v VALUES ('epoch 1')`)
	var rivalErr error
	err := db.Tx(bg, func(tx storage.Tx) error {
		var n int64
		if _, err := storage.QueryRow(tx, `SELECT count(*) FROM v`, nil, &n); err != nil {
			return err
		}
		// A newer instance takes the next epoch between the read and the write.
		rivalErr = rival.Tx(bg, func(rtx storage.Tx) error {
			_, err := rtx.Exec(`INSERT INTO v VALUES ('rival')`)
			return err
		})
		_, err := tx.Exec(`INSERT INTO v VALUES (?)`, fmt.Sprintf("writer read %d", n))
		return err
	})
	got := names(t, db)
	if rivalErr == nil {
		assert.Error(t, err, "the rival committed after the transaction read: the transaction must not commit (v: %s)", got)
		assert.Equal(t, "epoch 1,rival", got)
		return
	}
	assert.ErrorIs(t, rivalErr, storage.CodeBusy, "the rival waited out the transaction's lock")
	require.NoError(t, err, "the transaction the rival waited for")
	assert.Equal(t, "epoch 1,writer read 1", got)
}

// failedCommitRolledBack: a COMMIT that fails and leaves its transaction
// open (SQLite's BUSY) returns its code, and the DB rolls the transaction
// back: its writes are gone, the next transaction runs, and no lock is left
// for another connection.
func failedCommitRolledBack(t conform.T, newDB NewDB) {
	db, faults := withCapability[CommitFaults](t, newDB)
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

// commitFailsAfterContextEnded: the context bounds only the wait for the
// database (contextEndingInsideFn), so a commit that fails after it ended
// mid-fn failed on its own: its error is the storage's, transient as
// BUSY is, not a cancellation (which no caller retries).
func commitFailsAfterContextEnded(t conform.T, newDB NewDB) {
	db, faults := withCapability[CommitFaults](t, newDB)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	faults.FailNextCommit(storage.CodeBusy)
	err := db.Tx(ctx, func(tx storage.Tx) error {
		cancel()
		_, err := tx.Exec(`INSERT INTO v VALUES ('lost')`)
		return err
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, storage.CodeBusy)
	assert.NotErrorIs(t, err, context.Canceled, "the commit's own failure")
	assert.True(t, storage.IsTransient(err), "%v", err)
}

func closedRefuses(t conform.T, newDB NewDB) {
	db, c := withCapability[Closer](t, newDB)
	require.NoError(t, c.Close())
	ran := false
	err := db.Tx(bg, func(tx storage.Tx) error { ran = true; return nil })
	assert.ErrorIs(t, err, storage.ErrClosed)
	assert.False(t, ran, "fn ran on a closed DB")
	assert.False(t, storage.IsTransient(err), "a closed DB is not a storage failure to retry")
}
