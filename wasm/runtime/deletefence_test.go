package runtime_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A guest superseded by a newer boot over the same database (a zombie, as
// a second process that took the tree over leaves it) must not delete the
// tree under the instance that owns it: the delete's transaction checks
// the epoch, as every write of core does, and refuses with a 503 (retried,
// the request reaches the live guest). The tree stays whole for B, and A,
// closed by its delete, neither arms a wake-up to reopen it nor reopens
// for one delivered (that reopen would take the tree back from B). A used
// to answer 204 and empty the tree.
func TestASupersededGuestsDeleteIsFenced(t *testing.T) {
	a := newEnv(t, 8, offlineConfig())
	require.NoError(t, a.boot(runtime.Options{}))
	a.createAndPrompt("one two three")
	a.fireTimers(10 * 60_000)
	require.Equal(t, "idle", a.snapshot().Status)
	a.s.wake = 0 // whatever A armed was delivered: used up

	b := a.sibling(108)
	require.NoError(t, b.boot(runtime.Options{}), "B takes the tree over: a new epoch")

	r := a.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 503, r.status, r.body.String())
	require.Contains(t, r.body.String(), `"unavailable"`)
	require.Zero(t, a.s.wake, "the superseded guest arms no reopening")
	// Nor does a wake-up delivered to it reopen it (a new epoch, which
	// would fence B).
	require.NoError(t, a.g.Wake(context.Background()))
	require.Zero(t, a.s.wake, "the wake-up delivered to A arms nothing either")
	r = a.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "to the zombie", "id": "p3"})
	require.Equal(t, 503, r.status, "A stays closed after the wake-up (reopened, it would write): %s", r.body.String())

	r = b.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 200, r.status, r.body.String())
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, b.terminals(), "the tree's log is whole")
	r = b.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "after the zombie's delete", "id": "p2"})
	require.Equal(t, 202, r.status, r.body.String())

	// The live guest deletes it.
	r = b.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 204, r.status, r.body.String())
	r = b.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
}

// A superseded guest whose delete fails before its fence can tell (its
// BEGIN meets the lock of another connection, say the live instance's
// write) answers 503 and arms the reopening, as a delete that deleted
// nothing does; but its reopen, when that wake-up comes, must not take a
// new epoch over the instance that owns the tree (B's next write would be
// refused 503): the reopen checks the closed instance's epoch first, and
// a fenced one is superseded, as its delete would have found.
func TestASupersededGuestsFailedDeleteDoesNotReopen(t *testing.T) {
	cfg := offlineConfig()
	cfg.TreeID = treeID
	path := filepath.Join(t.TempDir(), "tree.db")
	// A waits for no lock, as a connection whose busy timeout is spent.
	db, err := sqlitedb.Open(path, sqlitedb.Options{BusyTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	a := &env{t: t, path: path, db: db, conn: db.Conn(), s: newServices(8), cfg: cfg}
	other := rivalConn(t, path)
	begins := -1 // counting from the DELETE on
	require.NoError(t, a.boot(runtime.Options{Interpose: func(st runtime.Site) error {
		if begins < 0 || st.Import != abi.ImportSQLBegin || st.After {
			return nil
		}
		begins++
		// Two reads (the API's checks of the root), then the delete's
		// transaction, refused at its BEGIN; its read-back reads.
		switch {
		case begins == 3:
			require.NoError(t, other.Begin())
		case begins == 4 && other.InTx():
			require.NoError(t, other.Rollback())
		}
		return nil
	}}))
	a.createAndPrompt("one two three")
	a.fireTimers(10 * 60_000)
	require.Equal(t, "idle", a.snapshot().Status)
	a.s.wake = 0

	b := a.sibling(108)
	require.NoError(t, b.boot(runtime.Options{}), "B takes the tree over: a new epoch")

	begins = 0
	r := a.do("DELETE", "/v1/sessions/"+treeID, nil)
	begins = -1
	require.Equal(t, 503, r.status, r.body.String())
	require.False(t, other.InTx())
	require.NotZero(t, a.s.wake, "A cannot tell it is superseded yet: the reopening is armed")
	a.deliverWakes(5, 60_000)
	// Found superseded, A is done: no retry of its reopen stays armed
	// (plants57 P23: a reopen that failed on the fence instead, retried on
	// the wake schedule for good, went unnoticed: it never took the epoch).
	require.Zero(t, a.s.wake, "A, superseded, arms no retry of its reopen")

	r = b.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "after the zombie's delete", "id": "p2"})
	require.Equal(t, 202, r.status, "B still owns the tree: %s", r.body.String())
	r = a.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "to the zombie", "id": "p3"})
	require.Equal(t, 503, r.status, "A, closed, writes nothing: %s", r.body.String())
}

// A reopen checks that the closed instance still owns the tree and takes
// its new epoch in one transaction: an instance that boots between the
// two (B, a second process taking the tree over while A's wake-up
// reopens it) is never superseded by A's reopening. A checked first, in
// a transaction of its own, and then took the next epoch unconditionally
// over B's, so B's next write was refused 503 while A served the tree.
func TestAReopenDoesNotTakeTheTreeFromAnInstanceBootedDuringIt(t *testing.T) {
	a, f := newFaultEnv(t, 5, offlineConfig())
	var b *env
	reopening, begins := false, 0
	require.NoError(t, a.boot(runtime.Options{Interpose: func(st runtime.Site) error {
		if !reopening || st.Import != abi.ImportSQLBegin || st.After {
			return nil
		}
		begins++
		if begins == 2 { // past the reopen's first transaction (it used to check the epoch), before its epoch's
			b = a.sibling(108)
			require.NoError(t, b.boot(runtime.Options{}), "B takes the tree over: a new epoch")
		}
		return nil
	}}))
	r := a.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())

	failDeleteOnAFullDisk(t, a, f)

	reopening = true
	a.deliverWake(60_000)
	reopening = false
	require.NotNil(t, b, "B booted during A's reopen")

	r = b.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "to the live instance", "id": "p1"})
	require.Equal(t, 202, r.status, "B still owns the tree: %s", r.body.String())
	r = a.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "to the zombie", "id": "p2"})
	require.Equal(t, 503, r.status, "A, superseded, writes nothing: %s", r.body.String())
	require.Zero(t, a.s.wake, "nor arms a wake-up to reopen again")
}

// A reopen whose epoch's commit is stored although reported failed (a
// late IOERR) owns the tree: the epoch it finds on reading back is its
// own, not a newer instance's. It read that as a newer boot's (ErrFenced):
// the guest took itself for superseded, so no instance served the tree
// (every write 503) and no wake-up resumed its turns.
func TestAReopenWhoseEpochCommitFailedLateServes(t *testing.T) {
	a, f := newFaultEnv(t, 5, offlineConfig())
	require.NoError(t, a.boot(runtime.Options{}))
	r := a.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())

	failDeleteOnAFullDisk(t, a, f)

	f.FailLateCommits(1, faultvfs.IOErrFsync) // the reopen's first commit: its epoch's
	a.deliverWake(60_000)
	require.Equal(t, 1, f.LateCommits(), "the reopen's epoch commit was reported failed")

	r = a.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "after the reopen", "id": "p1"})
	require.Equal(t, 202, r.status, "the reopened instance serves: %s", r.body.String())
}

// TestAReopenWhoseEpochCommitFailedLateServes for an instance that booted
// read-only (a full disk) with a turn's claim left by the process before:
// its delete fails after the close, and the reopen's epoch commit is
// stored but reported failed. The reopen owns the tree; the claim keeps a
// wake-up. Simulator seed 2439 (-smallbudget 1 -deletes 0.5, guest at
// efaf0e8): the reopen took itself for superseded ("instance booted at
// database epoch 3 without one of its own, database epoch 4"), and its
// wake handler returned with the tree claimed and no wake-up armed.
func TestAReopenOfAReadOnlyBootWhoseEpochCommitFailedLateKeepsTheClaimsWakeUp(t *testing.T) {
	a, f := newFaultEnv(t, 5, offlineConfig())
	require.NoError(t, a.boot(runtime.Options{}))
	a.createAndPrompt("one two three") // its model call never answered: the turn holds the claim

	// The process dies; the next boots while the disk is full.
	a.s.timers, a.s.egress, a.s.wake = map[uint64]int64{}, map[uint64]runtime.EgressRequest{}, 0
	epoch := a.epoch()
	f.FailFor(10*time.Minute, faultvfs.Full)
	require.NoError(t, a.boot(runtime.Options{}), "a boot storage refuses serves read-only")
	require.Equal(t, epoch, a.epoch(), "the read-only boot took no epoch of its own")
	r := a.deleteUntilAnswered()
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, a.s.wake, "the closed instance's reopening is armed")
	f.Heal()

	f.FailLateCommits(1, faultvfs.IOErrFsync) // the reopen's first commit: its epoch's
	a.deliverWake(0)
	require.Equal(t, 1, f.LateCommits(), "the reopen's epoch commit was reported failed")
	require.NotNil(t, a.snapshot().Claim, "the turn's claim is still there")
	require.NotZero(t, a.s.wake, "the claim has a wake-up")
	r = a.do("POST", "/v1/sessions/"+treeID+"/interrupt", map[string]any{})
	require.Equal(t, 200, r.status, "the reopened instance serves: %s", r.body.String())
}

// failDeleteOnAFullDisk has a's DELETE fail on a full disk (503, the
// closed instance's reopening armed), then heals the disk.
func failDeleteOnAFullDisk(t *testing.T, a *env, f *faultvfs.Fault) {
	t.Helper()
	f.FailFor(10*time.Minute, faultvfs.Full)
	r := a.deleteUntilAnswered()
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, a.s.wake, "the closed instance's reopening is armed")
	f.Heal()
}

// A reopen whose epoch's commit is stored although reported failed, and
// whose read of the epoch that follows is refused (another connection's
// write lock), fails: the closed instance stays, the tree's epoch now the
// failed reopen's, which no instance holds, and the reopen's retry is
// armed. A DELETE sent meanwhile is the closed instance's, and the tree is
// still its own: the delete deletes it. Its fence took the failed
// reopen's epoch for a newer boot's (ErrFenced): the delete answered 503
// and marked the guest superseded, so no wake-up reopened it again, and
// the tree, its turn's claim with it, was served by nothing (every write
// 503) and resumed by nothing.
func TestADeleteAfterAReopenThatFailedWithItsEpochStoredIsTheClosedInstances(t *testing.T) {
	a, f := newFaultEnvWith(t, 5, offlineConfig(), sqlitedb.Options{BusyTimeout: -1})
	other := rivalConn(t, a.path)
	lockAt, begins := 0, 0 // the other connection takes its lock at the lockAt-th BEGIN from now
	require.NoError(t, a.boot(runtime.Options{Interpose: func(st runtime.Site) error {
		if lockAt == 0 || st.Import != abi.ImportSQLBegin || st.After {
			return nil
		}
		if begins++; begins == lockAt {
			require.NoError(t, other.Begin())
		}
		return nil
	}}))
	a.createAndPrompt("one two three") // its model call never answered: the turn holds the claim
	failDeleteOnAFullDisk(t, a, f)

	// The reopen: the schema's transaction, the epoch's (stored, reported
	// failed), then the read of the epoch, refused.
	epoch := a.epoch()
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	lockAt = 3
	a.deliverWake(60_000)
	lockAt = 0
	require.Equal(t, 1, f.LateCommits(), "the reopen's epoch commit was reported failed")
	require.True(t, other.InTx(), "the reopen's read of the epoch met the lock")
	require.NoError(t, other.Rollback())
	require.Equal(t, epoch+1, a.epoch(), "the failed reopen's epoch was stored")
	require.NotZero(t, a.s.wake, "the reopen's retry is armed")

	r := a.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 204, r.status, "no newer instance owns the tree: %s", r.body.String())
	require.Zero(t, a.s.wake, "the deleted tree's wake-up is cleared")
	r = a.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
}
