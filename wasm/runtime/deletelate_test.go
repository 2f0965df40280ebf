package runtime_test

import (
	"fmt"
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

// A delete whose transaction failed, and whose read-back (deleteStored)
// fails as well, tells nothing of what the disk holds: the tree is taken
// as still there, answered 503, and serves on. Here the disk refuses the
// delete's COMMIT (full: nothing stored), and another connection then
// takes the write lock, so the read-back is refused too; once the lock
// is let go the tree is read as it was. A read-back whose failure counted
// as "stored" answered 204 and marked the tree deleted (404) while its
// rows stayed.
func TestDeleteWhoseReadBackFailsLeavesTheTree(t *testing.T) {
	e, f := newFaultEnv(t, 7, offlineConfig())
	take, release := e.lockFromAnother()
	// The guest's connection goes through the fault VFS, and is refused
	// at once by the other's lock.
	name := fmt.Sprintf("runtime-test-fault-%d", faultSeq.Add(1))
	faultvfs.Register(name, f)
	t.Cleanup(func() { faultvfs.Unregister(name) })
	mine, err := sqlitedb.Open(e.path, sqlitedb.Options{VFS: name, BusyTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { mine.Close() })
	e.db, e.conn = mine, mine.Conn()

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
