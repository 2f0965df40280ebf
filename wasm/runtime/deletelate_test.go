package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A delete whose COMMIT is reported failed after it reached the disk (a
// late I/O error) deleted the tree all the same, and the guest says so:
// 204, the wake-up cleared, and 404 for the tree's next request. It used
// to answer 503 ("the tree stays as it was") with the instance closed,
// then refuse every request 503 until the wake-up's reopen found the
// tree gone (the simulator's deleted-stays-gone, seed 3 with -delfault).
func TestDeleteWhoseCommitIsReportedFailedButStoredIsDone(t *testing.T) {
	e, f := newFaultEnv(t, 7, offlineConfig()) // the guest's connection goes through the fault VFS
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("one two three four five six seven eight")
	e.deliverWakes(5, 10*60_000)
	// The turn has ended, so the delete's close stops nothing and writes
	// nothing: the next commit that writes is the delete's.
	require.Equal(t, "idle", e.snapshot().Status)

	f.FailLateCommits(1, faultvfs.IOErrFsync)
	r := e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 1, f.LateCommits(), "the delete's commit was reported failed after it was durable")
	require.Equal(t, 204, r.status, r.body.String())
	require.Zero(t, e.s.wake, "the deleted tree's wake-up is cleared")
	r = e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
}

// A delete whose COMMIT is reported failed although stored, and whose
// read-back then fails too (another connection's write lock: the guest's
// reads begin as writes), cannot tell that it is done: it answers 503 and
// arms the reopening, as for a delete that deleted nothing. The reopen
// reads the tree again and, finding no root session, finishes the delete:
// the wake-up is cleared, which tells the host the tree is gone
// (docs/abi.md, wake_clear), and nothing is served for it, a create of
// it included. The reopen used to serve the emptied tree as a tree not
// created yet: 404 for its routes, but a create made it again, and the
// host was never told (the client's retried DELETE answers 404, on which
// a host drops nothing).
func TestDeleteStoredButUnreadIsFinishedByTheReopen(t *testing.T) {
	// The guest waits for no lock, as a connection whose busy timeout is spent.
	e, f := newFaultEnvWith(t, 9, offlineConfig(), sqlitedb.Options{BusyTimeout: -1})
	other := rivalConn(t, e.path)

	begins := -1 // counting from the DELETE on
	require.NoError(t, e.boot(runtime.Options{Interpose: func(st runtime.Site) error {
		if begins >= 0 && st.Import == abi.ImportSQLBegin && !st.After {
			begins++
			// Two reads (the API's checks of the root), the delete's
			// transaction, then its read-back's.
			if begins == 4 {
				require.NoError(t, other.Begin())
			}
		}
		return nil
	}}))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())

	f.FailLateCommits(1, faultvfs.IOErrFsync)
	begins = 0
	r = e.do("DELETE", "/v1/sessions/"+treeID, nil)
	begins = -1
	require.Equal(t, 1, f.LateCommits(), "the delete's commit was reported failed after it was durable")
	require.True(t, other.InTx(), "the read-back met the lock")
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, e.s.wake, "the reopening is armed")
	require.NoError(t, other.Rollback())

	e.reopenFinishesTheDelete()
	r = e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
	require.Zero(t, e.s.wake)
}

// As above, but the reopen's listing of the sessions fails too (the other
// connection's lock again): the reopen cannot tell whether the delete was
// stored, so it must not serve the tree, which it would serve as one never
// created (a create made it again, 201, and the host was never told). It
// fails, the instance closed (503) and the wake-up armed for its retry;
// the retry reads the tree, finds no root session and finishes the
// delete.
func TestDeleteStoredButUnreadSurvivesAFailedListingAtTheReopen(t *testing.T) {
	// The guest waits for no lock, as a connection whose busy timeout is spent.
	e, f := newFaultEnvWith(t, 9, offlineConfig(), sqlitedb.Options{BusyTimeout: -1})
	other := rivalConn(t, e.path)

	// lockAt, counting BEGINs from when it is set, takes the other
	// connection's lock before the lockAt-th and lets it go before the
	// next one.
	begins, lockAt := 0, 0
	require.NoError(t, e.boot(runtime.Options{Interpose: func(st runtime.Site) error {
		if lockAt == 0 || st.Import != abi.ImportSQLBegin || st.After {
			return nil
		}
		begins++
		switch {
		case begins == lockAt:
			require.NoError(t, other.Begin())
		case begins == lockAt+1 && other.InTx():
			require.NoError(t, other.Rollback())
		}
		return nil
	}}))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())

	// The delete: two reads (the API's checks of the root), its
	// transaction (stored, reported failed), then its read-back, refused.
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	begins, lockAt = 0, 4
	r = e.do("DELETE", "/v1/sessions/"+treeID, nil)
	lockAt = 0
	require.Equal(t, 1, f.LateCommits())
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, e.s.wake, "the reopening is armed")
	require.NoError(t, other.Rollback())

	// The reopen: its boot's two transactions (the schema, then the epoch,
	// which checks the closed instance's), then the listing, refused.
	clears := e.s.clears
	begins, lockAt = 0, 3
	e.deliverWake(60_000)
	lockAt = 0
	if other.InTx() {
		require.NoError(t, other.Rollback())
	}
	require.Equal(t, clears, e.s.clears, "nothing is known yet")
	require.NotZero(t, e.s.wake, "the reopen's retry is armed")
	r = e.do("POST", "/v1/sessions", map[string]any{})
	require.NotEqual(t, 201, r.status, "the deleted tree is not made again: %s", r.body.String())

	e.reopenFinishesTheDelete()
}

// reopenFinishesTheDelete delivers the wake-up of a tree whose delete was
// stored but unread: its reopen finds no root session and finishes the
// delete, clearing the wake-up (the host is told the tree is gone), and
// nothing is served for the tree after, a create of it included.
func (e *env) reopenFinishesTheDelete() {
	t := e.t
	t.Helper()
	clears := e.s.clears
	e.deliverWakes(5, 60_000)
	require.Equal(t, clears+1, e.s.clears, "the reopen cleared the deleted tree's wake-up")
	require.Zero(t, e.s.wake)
	r := e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
	r = e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 409, r.status, "the deleted tree is not made again: %s", r.body.String())
}

// A delete whose transaction failed, and whose read-back (deleteStored)
// fails as well, tells nothing of what the disk holds: the tree is taken
// as still there, answered 503, and serves on. Here the disk refuses the
// delete's COMMIT (full: nothing stored), and another connection then
// takes the write lock, so the read-back is refused too; once the lock
// is let go the tree is read as it was. A read-back whose failure counted
// as "stored" answered 204 and marked the tree deleted (404) while its
// rows stayed.
func TestDeleteWhoseReadBackFailsLeavesTheTree(t *testing.T) {
	// The guest's connection goes through the fault VFS, and is refused
	// at once by the other's lock.
	e, f := newFaultEnvWith(t, 7, offlineConfig(), sqlitedb.Options{BusyTimeout: -1})
	other := rivalConn(t, e.path)
	take := func() { require.NoError(t, other.Begin()) }
	release := func() { require.NoError(t, other.Rollback()) }

	deleting, taken := false, false
	require.NoError(t, e.boot(runtime.Options{Interpose: func(s runtime.Site) error {
		// The delete's transaction failed and was rolled back: the
		// read-back's is next.
		if deleting && !taken && s.Import == abi.ImportSQLRollback && s.After {
			take()
			taken = true
		}
		return nil
	}}))
	e.createAndPrompt("one two three four five six seven eight")
	e.deliverWakes(5, 10*60_000)
	require.Equal(t, "idle", e.snapshot().Status)

	f.FailNext(1, faultvfs.Full)
	deleting = true
	r := e.do("DELETE", "/v1/sessions/"+treeID, nil)
	deleting = false
	require.True(t, taken, "the delete's transaction failed")
	release()
	require.Equal(t, 503, r.status, "a delete that may not be stored is not done: %s", r.body.String())
	r = e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 200, r.status, "the tree stays: %s", r.body.String())
}
