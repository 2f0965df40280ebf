package core_test

// Races between storage-fault waits and the rest of the lifecycle: while a
// write waits out a storage failure it holds no lock, so whatever it
// decided before the wait must be checked again when it commits.

import (
	"context"

	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// openUnswept opens another instance on the tree without a boot sweep, so
// the claims the crashed one left stay there, running nowhere.
func openUnswept(t *testing.T, tr *treetest.Tree, d core.Driver) *core.Instance {
	t.Helper()
	host, _, kdb := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, d)
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })
	return inst
}

// An interrupt committed directly (nothing ran here when it looked) lets go
// of the claim lock while it waits for storage. If an execution of the
// session starts here meanwhile (a sweep), the interrupt must not commit
// over it and leave it running: that is the check-then-act race of DESIGN
// §15 (a tool body or model request after the interrupt committed). The
// execution must be cancelled and record the interrupt itself.
func TestInterruptWaitingForStorageDoesNotLeaveAnExecutionRunning(t *testing.T) {
	tr, f, d, n1 := faultTree(t, 4)
	sid := n1.NewSession("s")
	pid := n1.Admit(sid, "hold")
	<-d.Started
	n1.Crash()

	// A second instance, not swept: the claim is there and runs nowhere.
	inst := openUnswept(t, tr, d)
	require.False(t, inst.RunningHere(sid))

	f.FailNext(1, faultvfs.Full) // the interrupt's first attempt is refused
	var did bool
	var ierr error
	var x *core.Execution
	tr.DriveEach(func() {
		did, ierr = inst.Interrupt(ctx, sid, event.ReasonUser)
	}, func(w retry.Wait) {
		if w.Retry != 1 || x != nil {
			return
		}
		// During the interrupt's wait a sweep starts the turn here.
		_, err := inst.Recover(ctx, sid, func(core.ClaimState, int64) core.Decision { return core.Decision{Action: core.Start} })
		require.NoError(t, err)
		x = <-d.Started
	})
	require.NoError(t, ierr)
	assert.True(t, did)
	require.NotNil(t, x, "the sweep started the turn during the wait")

	assert.False(t, inst.RunningHere(sid), "no execution runs after the interrupt answered")
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, 1)
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, x.ID(), in.ExecutionID, "the running execution recorded the interrupt itself")
	assert.False(t, tr.Claim(sid).Exists)
}

// A recovery whose commit was durable but reported failed (a late IOERR)
// waits with the claim lock let go. A second sweep in that wait finds the
// claim not running here and resumes it. The first recovery's rerun then
// finds its own commit stored: it must not launch its (now superseded)
// execution beside the one running — one drain per session per instance.
func TestRecoverRerunDoesNotLaunchBesideARunningExecution(t *testing.T) {
	tr, f, d, n1 := faultTree(t, 8)
	sid := n1.NewSession("s")
	n1.Admit(sid, "hold")
	<-d.Started
	n1.Crash()

	inst := openUnswept(t, tr, d)

	resume := func(c core.ClaimState, _ int64) core.Decision {
		return core.Decision{Action: core.Resume, Attempt: c.Attempts + 1}
	}
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	var second *core.Execution
	var rerr error
	tr.DriveEach(func() {
		_, rerr = inst.Recover(ctx, sid, resume)
	}, func(w retry.Wait) {
		if second != nil {
			return
		}
		// Another sweep, during the first one's wait.
		dd, err := inst.Recover(ctx, sid, resume)
		require.NoError(t, err)
		require.Equal(t, core.Resume, dd.Action)
		second = <-d.Started
	})
	require.NoError(t, rerr)
	require.NotNil(t, second)

	assert.Equal(t, 1, f.LateCommits())
	assert.Equal(t, second.ID(), tr.Claim(sid).ExecutionID, "the second resume holds the claim")
	select {
	case x := <-d.Started:
		t.Errorf("execution %s launched beside %s, which holds the claim", x.ID(), second.ID())
	default:
	}
	assert.True(t, inst.RunningHere(sid))

	// The execution registered here must be the one holding the claim: an
	// interrupt then stops it and it records the interrupt itself.
	did, err := inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, did)
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, 1)
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, second.ID(), in.ExecutionID, "the execution holding the claim was the one stopped")
	assert.False(t, inst.RunningHere(sid))
	assert.Equal(t, 2, d.Runs(), "the crashed run and one resume")
}

// An instance that booted read-only (storage refused its epoch) takes its
// epoch with its first accepted write. If a newer instance booted in the
// meantime, the older one is superseded: its late epoch must not fence the
// newer instance, which owns the tree.
func TestReadOnlyBootDoesNotFenceANewerInstance(t *testing.T) {
	tr, f, d, n1 := faultTree(t, 4)
	n1.NewSession("s")
	n1.Crash()

	old := bootReadOnly(t, tr, f, d)

	newer := tr.Boot(d)
	require.False(t, newer.Inst.ReadOnly())
	epoch := newer.Inst.Epoch()

	// A late request reaches the superseded instance.
	_, err := old.Inst.CreateSession(ctx, core.NewSession{ID: "from-old", Principal: "tester"})
	assert.ErrorIs(t, err, core.ErrFenced, "a superseded instance must not write")

	_, err = newer.Inst.CreateSession(ctx, core.NewSession{ID: "from-newer", Principal: "tester"})
	require.NoError(t, err, "the newest instance keeps the tree")
	assert.Equal(t, epoch, newer.Inst.Epoch())
	var dbEpoch int64
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT epoch FROM tree`, nil, &dbEpoch)
		return err
	})
	assert.Equal(t, epoch, dbEpoch)
}

// A turn whose storage failure is owed (its settlement window spent) and
// that the user then interrupts once storage is back has nothing owed any
// more: its claim is gone, so no sweep will ever visit it. The instance
// must become idle again (evictable), not stay busy forever.
func TestInterruptedOwedTurnLeavesTheInstanceIdle(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hold")
	<-d.Started
	f.FailFor(24*time.Hour, faultvfs.Full)
	d.Release()
	n.IdleDriving()
	require.True(t, n.Inst.ReadOnly())
	require.False(t, n.Inst.Idle(), "the failure is owed")

	f.Heal()
	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	assert.False(t, tr.Claim(sid).Exists)

	rep, err := recovery.Wake(ctx, n.Inst)
	require.NoError(t, err)
	assert.Empty(t, rep.Decisions)
	assert.True(t, n.Inst.Idle(), "nothing is owed any more: the instance may be evicted")
	assert.Len(t, treetest.Terminals(tr.Events(sid)), 1)

	// Later turns of the session do not change that.
	pid2 := n.Admit(sid, "after")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid2))
	assert.True(t, n.Inst.Idle())
}

// checkEpoch runs inst's CheckEpoch in a transaction of its own on tr.
func checkEpoch(tr *treetest.Tree, inst *core.Instance) (err error) {
	tr.Read(func(tx storage.Tx) error {
		err = inst.CheckEpoch(tx)
		return nil
	})
	return err
}

// CheckEpoch, the fence of a write made outside core (a guest's delete),
// passes only the instance that owns the tree: the newest to take an
// epoch, or one that booted read-only while no instance booted since it.
func TestCheckEpochPassesOnlyTheTreesOwner(t *testing.T) {
	tr, f, d, n1 := faultTree(t, 5)
	n1.NewSession("s")
	require.NoError(t, checkEpoch(tr, n1.Inst), "the live instance owns the tree")
	n1.Crash()

	old := bootReadOnlyUnhealed(t, tr, f, d)
	require.NoError(t, checkEpoch(tr, old.Inst), "no instance booted since the read-only one")

	f.Heal()
	newer := tr.Boot(d)
	require.NoError(t, checkEpoch(tr, newer.Inst))
	require.ErrorIs(t, checkEpoch(tr, old.Inst), core.ErrFenced, "a newer instance took an epoch")
	require.ErrorIs(t, checkEpoch(tr, n1.Inst), core.ErrFenced)
}

// CheckEpoch follows core's own fence for a read-only boot whose epoch
// take was stored although reported failed (a late IOERR): the epoch is
// marked as this instance's (takeEpoch's owner token), and core's next
// write keeps it (TestReadOnlyBootsLateFailedEpochTakeIsKept). A write
// made outside core (a guest's delete) must pass it too: fenced, the
// guest would take itself for superseded and never serve the tree again.
func TestCheckEpochKeepsAReadOnlyBootsLateFailedEpochTake(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	n.NewSession("s")
	n.Crash()

	n2 := bootReadOnly(t, tr, f, d)
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	_, err := n2.Inst.CreateSession(ctx, core.NewSession{ID: "t", Principal: "tester"})
	require.Error(t, err, "the epoch take's commit is reported failed")
	require.Zero(t, n2.Inst.Epoch(), "the instance has not learnt the epoch it stored")

	require.NoError(t, checkEpoch(tr, n2.Inst), "the tree's epoch is this instance's own")
	_, err = n2.Inst.CreateSession(ctx, core.NewSession{ID: "u", Principal: "tester"})
	require.NoError(t, err, "and core's own fence agrees")
}

// Reopen opens a new instance over the tree of a closed one only while
// that one still owns it, checked in the transaction that takes the new
// epoch: after a newer instance booted it fails with ErrFenced and takes
// nothing, so the newer one's epoch stands.
func TestReopenOnlyWhileTheClosedInstanceOwnsTheTree(t *testing.T) {
	tr, f, d, n1 := faultTree(t, 5)
	n1.NewSession("s")
	closed := n1.Inst
	require.NoError(t, closed.Close(ctx))

	host, _, kdb := tr.Host()
	again, err := core.Reopen(ctx, closed, host, tr.Cfg, d)
	require.NoError(t, err, "no instance booted since: the reopen owns the tree")
	require.Greater(t, again.Epoch(), closed.Epoch())
	require.NoError(t, again.Close(ctx))
	kdb.Kill()

	newer := openUnswept(t, tr, d)
	host, _, kdb = tr.Host()
	t.Cleanup(kdb.Kill)
	_, err = core.Reopen(ctx, again, host, tr.Cfg, d)
	require.ErrorIs(t, err, core.ErrFenced, "a newer instance booted since the closed one")
	// Storage refusing writes changes nothing: the check comes before the
	// epoch's write, so the reopen is refused, not booted read-only at the
	// newer instance's epoch (whose first write would take the tree).
	f.FailFor(time.Hour, faultvfs.Full)
	_, err = core.Reopen(ctx, again, host, tr.Cfg, d)
	require.ErrorIs(t, err, core.ErrFenced, "read-only, still fenced")
	f.Heal()
	// Nor does storage refusing the epoch's transaction before it ran
	// (busy, so its fence never ran): the read-back that follows checks
	// ownership the same way.
	host.DB = &refuseTx{DB: host.DB, refuse: 2} // the schema's, then the epoch's
	_, err = core.Reopen(ctx, again, host, tr.Cfg, d)
	require.ErrorIs(t, err, core.ErrFenced, "refused before its take, still fenced")
	require.NoError(t, checkEpoch(tr, newer), "the newer instance still owns the tree")
}

// A reopen whose epoch take was stored although reported failed (a late
// IOERR) boots read-only, as Open does, and keeps that epoch: the take's
// own transaction checked the closed instance's ownership. The read that
// follows the failure finds the closed instance's epoch gone, taken by
// this very reopen, which is no newer instance: fenced there, a guest
// would take itself for superseded and never serve the tree again, its
// claims with no wake-up (wasm/guest reopen).
func TestReopenKeepsItsLateFailedEpochTake(t *testing.T) {
	tr, f, d, n1 := faultTree(t, 5)
	n1.NewSession("s")
	closed := n1.Inst
	require.NoError(t, closed.Close(ctx))
	requireReopenKeepsLateFailedTake(t, tr, f, d, closed)
}

// TestReopenKeepsItsLateFailedEpochTake for a closed instance that booted
// read-only and never took an epoch of its own: its fence compares the
// epoch it booted at, which the reopen's stored take replaced. Simulator
// seed 2439 (-smallbudget 1 -deletes 0.5, guest at efaf0e8): a guest booted
// read-only in a disk-full window, its delete failed after the close, and
// the reopen's epoch commit met a late IOERR; the fallback's fence said
// "instance booted at database epoch 3 without one of its own, database
// epoch 4: fenced", the guest took itself for superseded and its wake
// handler returned with the tree claimed and no wake-up armed.
func TestReopenOfAReadOnlyInstanceKeepsItsLateFailedEpochTake(t *testing.T) {
	tr, f, d, n1 := faultTree(t, 5)
	n1.NewSession("s")
	n1.Crash()
	closed := bootReadOnly(t, tr, f, d).Inst
	require.NoError(t, closed.Close(ctx))
	requireReopenKeepsLateFailedTake(t, tr, f, d, closed)
}

// requireReopenKeepsLateFailedTake reopens closed with its epoch's commit
// stored but reported failed, and requires the reopened instance to own
// the tree: read-only, its epoch kept by its first write.
func requireReopenKeepsLateFailedTake(t *testing.T, tr *treetest.Tree, f *faultvfs.Fault, d *treetest.Driver, closed *core.Instance) {
	t.Helper()
	host, _, kdb := tr.Host()
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	again, err := core.Reopen(ctx, closed, host, tr.Cfg, d)
	require.NoError(t, err, "the epoch the reopen stored is its own")
	t.Cleanup(func() { kdb.Kill(); again.Abandon() })
	require.True(t, again.ReadOnly(), "its epoch's commit was reported failed")
	require.ErrorIs(t, checkEpoch(tr, closed), core.ErrFenced, "the reopen's epoch was stored")
	require.NoError(t, checkEpoch(tr, again), "and is the reopened instance's own")
	_, err = again.CreateSession(ctx, core.NewSession{ID: "t", Principal: "tester"})
	require.NoError(t, err, "its first write keeps it")
}

// refuseTx is a storage.DB whose refuse-th transaction from now (counting
// from 1; 0: none) is refused busy before it begins.
type refuseTx struct {
	storage.DB
	refuse int
}

func (r *refuseTx) Tx(c context.Context, fn func(storage.Tx) error) error {
	if r.refuse--; r.refuse == 0 {
		return &storage.Error{Code: storage.CodeBusy, Msg: "refused by the test"}
	}
	return r.DB.Tx(c, fn)
}

// A reopen whose epoch take storage refuses before its check runs (busy
// at its BEGIN) falls back to read-only as Open does, at the epoch it
// reads back, and that read checks the closed instance's ownership too:
// after a newer instance booted, the reopen is fenced there. Booted
// read-only at the newer instance's epoch instead, its first write would
// take the next epoch (ensureEpoch) and the tree with it.
func TestReopenRefusedBeforeItsCheckIsFencedOnReadingBack(t *testing.T) {
	tr, _, d, n1 := faultTree(t, 5)
	n1.NewSession("s")
	closed := n1.Inst
	require.NoError(t, closed.Close(ctx))
	newer := openUnswept(t, tr, d)

	host, _, kdb := tr.Host()
	t.Cleanup(kdb.Kill)
	host.DB = &refuseTx{DB: host.DB, refuse: 2} // the schema's, then the epoch's, refused
	again, err := core.Reopen(ctx, closed, host, tr.Cfg, d)
	if again != nil {
		t.Cleanup(again.Abandon)
	}
	require.ErrorIs(t, err, core.ErrFenced, "a newer instance booted since the closed one")
	require.Nil(t, again)
	require.NoError(t, checkEpoch(tr, newer), "the newer instance still owns the tree")
}

// A reopen that failed after its epoch take was stored although reported
// failed (a late IOERR, then storage refusing the read-back) leaves the
// closed instance's epoch replaced by one no live instance holds. The
// next reopen from the same closed instance (the guest's wake-up retries
// it) is that reopen tried again, not a newer instance: it takes the
// tree, where it was fenced and the guest took itself for superseded,
// serving nothing, its claims with no wake-up.
func TestReopenTriedAgainAfterAFailedOneWhoseEpochWasStored(t *testing.T) {
	tr, d, closed := closedAfterAFailedReopen(t)
	host, _, kdb := tr.Host()
	t.Cleanup(kdb.Kill)
	again, err := core.Reopen(ctx, closed, host, tr.Cfg, d)
	require.NoError(t, err, "no instance booted since the closed one but its own reopen")
	t.Cleanup(again.Abandon)
	_, err = again.CreateSession(ctx, core.NewSession{ID: "t", Principal: "tester"})
	require.NoError(t, err)
}

// The closed instance whose reopen failed with its epoch stored still owns
// the tree, for a write its host makes outside core (CheckEpoch: the
// guest's delete, sent before the reopen's retry): no instance holds the
// failed reopen's epoch. Fenced, the guest took the delete's tree for a
// newer instance's, answered 503, and stopped reopening: the tree was
// served by nothing, its claims with no wake-up. Once a reopen returns
// the instance that replaces it, the closed one is fenced.
func TestAClosedInstanceWhoseReopenFailedWithItsEpochStoredOwnsTheTree(t *testing.T) {
	tr, d, closed := closedAfterAFailedReopen(t)
	require.NoError(t, checkEpoch(tr, closed), "no instance holds the failed reopen's epoch")

	host, _, kdb := tr.Host()
	t.Cleanup(kdb.Kill)
	again, err := core.Reopen(ctx, closed, host, tr.Cfg, d)
	require.NoError(t, err)
	t.Cleanup(again.Abandon)
	require.ErrorIs(t, checkEpoch(tr, closed), core.ErrFenced, "the reopened instance replaces the closed one")
	require.NoError(t, checkEpoch(tr, again))
}

// closedAfterAFailedReopen is a closed instance whose Reopen failed after
// its epoch take was stored although reported failed: the take's commit
// met a late IOERR, and storage refused the read of the epoch that
// follows.
func closedAfterAFailedReopen(t *testing.T) (*treetest.Tree, *treetest.Driver, *core.Instance) {
	t.Helper()
	tr, f, d, n1 := faultTree(t, 5)
	n1.NewSession("s")
	closed := n1.Inst
	require.NoError(t, closed.Close(ctx))

	host, _, kdb := tr.Host()
	defer kdb.Kill()
	host.DB = &refuseTx{DB: host.DB, refuse: 3} // the schema's, the epoch's, then the read-back, refused
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	_, err := core.Reopen(ctx, closed, host, tr.Cfg, d)
	require.Error(t, err, "the epoch take reported failed, the read-back refused")
	require.Equal(t, closed.Epoch()+1, treeEpoch(tr), "the failed reopen's epoch was stored")
	return tr, d, closed
}

// treeEpoch is the tree's stored epoch.
func treeEpoch(tr *treetest.Tree) (epoch int64) {
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT epoch FROM tree`, nil, &epoch)
		return err
	})
	return epoch
}

// A reopen under way holds the epoch it took from the moment its take
// commits, before Reopen returns it: the closed instance is fenced from
// then, not only once the reopen returns. A write the closed instance's
// host makes in between (a guest's delete, checked by CheckEpoch) would
// otherwise pass, as for a reopen that failed, and delete the tree under
// the instance that holds it.
func TestAClosedInstanceIsFencedOnceItsReopenTookTheEpoch(t *testing.T) {
	tr, _, d, n1 := faultTree(t, 5)
	n1.NewSession("s")
	closed := n1.Inst
	require.NoError(t, closed.Close(ctx))

	host, _, kdb := tr.Host()
	t.Cleanup(kdb.Kill)
	var between error
	host.DB = &afterTx{DB: host.DB, n: 2, then: func() { between = checkEpoch(tr, closed) }} // the schema's, then the epoch's
	again, err := core.Reopen(ctx, closed, host, tr.Cfg, d)
	require.NoError(t, err)
	t.Cleanup(again.Abandon)
	require.Equal(t, closed.Epoch()+1, again.Epoch(), "the reopen took its epoch in the second transaction")
	require.ErrorIs(t, between, core.ErrFenced, "the reopen's epoch is taken: the closed instance no longer owns the tree")
}

// afterTx is a storage.DB that runs then right after its n-th transaction
// from now (counting from 1) has committed.
type afterTx struct {
	storage.DB
	n    int
	then func()
}

func (a *afterTx) Tx(c context.Context, fn func(storage.Tx) error) error {
	err := a.DB.Tx(c, fn)
	if a.n--; a.n == 0 && err == nil {
		a.then()
	}
	return err
}
