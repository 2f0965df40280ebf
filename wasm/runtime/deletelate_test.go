package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/faultvfs"
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
