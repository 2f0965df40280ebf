package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Storage faults (DESIGN §8), each on a real SQLite file opened through the
// fault-injecting VFS, with the fake clock moved through every wait for
// storage as it is announced (treetest.Drive).

// faultTree is the start of most tests here: a tree whose storage can be
// failed through f, and an instance booted on it with a driver d whose
// Started buffers runs executions.
func faultTree(t *testing.T, runs int) (*treetest.Tree, *faultvfs.Fault, *treetest.Driver, *treetest.Node) {
	t.Helper()
	tr := treetest.New(t)
	f := tr.Faults()
	d := treetest.NewDriver(runs)
	return tr, f, d, tr.Boot(d)
}

// bootReadOnly boots an instance while the disk refuses every write, so it
// serves reads only and has taken no epoch, then heals the disk: its first
// accepted write takes the epoch (ensureEpoch).
func bootReadOnly(t *testing.T, tr *treetest.Tree, f *faultvfs.Fault, d *treetest.Driver) *treetest.Node {
	t.Helper()
	n := bootReadOnlyUnhealed(t, tr, f, d)
	f.Heal()
	return n
}

// bootReadOnlyUnhealed is bootReadOnly with the disk left refusing writes,
// for a test that checks the read-only instance before the heal.
func bootReadOnlyUnhealed(t *testing.T, tr *treetest.Tree, f *faultvfs.Fault, d *treetest.Driver) *treetest.Node {
	t.Helper()
	f.FailFor(time.Hour, faultvfs.Full)
	n := tr.Boot(d)
	require.True(t, n.Inst.ReadOnly())
	require.Zero(t, n.Inst.Epoch(), "no epoch taken yet")
	return n
}

// count counts rows on a plain connection.
func count(tr *treetest.Tree, query string, args ...any) int {
	var n int
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, query, args, &n)
		return err
	})
	return n
}

func policies(waits []retry.Wait) map[string]int {
	out := map[string]int{}
	for _, w := range waits {
		out[w.Policy]++
	}
	return out
}

func createSession(tr *treetest.Tree, n *treetest.Node, id string) ([]retry.Wait, error) {
	var err error
	waits := tr.Drive(func() {
		_, err = n.Inst.CreateSession(ctx, core.NewSession{ID: id, Principal: "tester"})
	})
	return waits, err
}

// A late IOERR's commit, recognised by the rerun, is published like any
// other: a live stream (core/api's event stream, subscribed here) gets its
// events at once, not only when the session's next event shows the gap.
// Here it is the session's only event, so nothing later would.
func TestLateIOErrCommitReachesLiveSubscribers(t *testing.T) {
	tr, f, _, n := faultTree(t, 1)
	sub := n.Inst.Subscribe("s", 8)
	defer sub.Close()
	f.FailLateCommits(1, faultvfs.IOErrFsync)

	_, err := createSession(tr, n, "s")
	require.NoError(t, err)
	require.Equal(t, 1, f.LateCommits(), "the commit was reported failed")
	select {
	case ev := <-sub.C:
		assert.Equal(t, event.SessionCreated, ev.Type)
		assert.Equal(t, tr.Events("s")[0].ID, ev.ID, "the stored event, published once")
	default:
		t.Fatal("the late commit's event never reached the subscriber")
	}
	assert.Empty(t, sub.C, "published once")
}

// An append that meets a full disk for 10 s reruns its whole transaction
// on the write schedule and commits once: one row, one seq, with the id and
// timestamp fixed before the first attempt.
func TestAppendWaitsOutATenSecondFullDisk(t *testing.T) {
	tr, f, _, n := faultTree(t, 1)
	f.FailFor(10*time.Second, faultvfs.Full)
	var last int
	_, err := fmt.Sscanf(tr.IDs.NewID(), "id-%d", &last)
	require.NoError(t, err)

	waits, err := createSession(tr, n, "s")
	require.NoError(t, err)

	evs := tr.Events("s")
	require.Len(t, evs, 1, "one row")
	assert.Equal(t, int64(1), evs[0].Seq, "one seq")
	assert.Equal(t, fmt.Sprintf("id-%d", last+1), evs[0].ID, "the id minted for the first attempt, reused by every rerun")
	assert.Equal(t, event.SessionCreated, evs[0].Type)
	assert.Equal(t, int64(treetest.Start), evs[0].At, "the timestamp was fixed before the first attempt")
	assert.Equal(t, 1, count(tr, `SELECT count(*) FROM events`))
	assert.Equal(t, 1, count(tr, `SELECT count(*) FROM sessions`))

	assert.Equal(t, map[string]int{"write": len(waits)}, policies(waits), "only the write schedule")
	assert.Equal(t, 100*time.Millisecond, waits[0].Delay)
	assert.Greater(t, f.Failed(), 1, "the disk refused the first attempts")
	assert.GreaterOrEqual(t, tr.Clock.Now(), int64(treetest.Start+10_000), "committed only once space returned")
	assert.Less(t, tr.Clock.Now(), int64(treetest.Start+retry.WriteWindow.Milliseconds()))
	assert.False(t, n.Inst.ReadOnly())
}

// Past the 30 s window the append fails with ErrStorageUnavailable (no
// longer transient: nobody should retry it blindly) and stores nothing.
func TestAppendFailsAfterThirtySecondsOfFullDisk(t *testing.T) {
	tr, f, _, n := faultTree(t, 1)
	f.FailFor(40*time.Second, faultvfs.Full)

	waits, err := createSession(tr, n, "s")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrStorageUnavailable)
	assert.ErrorIs(t, err, storage.CodeFull, "the storage failure is kept")
	assert.ErrorIs(t, err, retry.ErrExhausted)
	assert.False(t, storage.IsTransient(err))
	assert.Equal(t, int64(treetest.Start+retry.WriteWindow.Milliseconds()), tr.Clock.Now(), "the last attempt closes the window")
	assert.Len(t, waits, 19)

	assert.Zero(t, count(tr, `SELECT count(*) FROM events`), "nothing stored")
	assert.Zero(t, count(tr, `SELECT count(*) FROM sessions`))
	assert.False(t, n.Inst.ReadOnly(), "one failed write does not make the tree read-only")

	tr.Clock.Advance(10 * time.Second) // the disk has room again
	_, err = createSession(tr, n, "s")
	require.NoError(t, err, "the same write succeeds once storage returns")
	assert.Equal(t, 1, count(tr, `SELECT count(*) FROM events`))
}

// A commit that reached the disk but was reported failed (a late IOERR)
// is recognised by the rerun, which finds its event stored with the same
// content and does not append it again.
func TestLateIOErrIsRecognisedAsCommitted(t *testing.T) {
	tr, f, _, n := faultTree(t, 1)
	f.FailLateCommits(1, faultvfs.IOErrFsync)

	waits, err := createSession(tr, n, "s")
	require.NoError(t, err)
	assert.Equal(t, 1, f.LateCommits(), "the commit was reported failed")
	require.Len(t, waits, 1, "one rerun")
	assert.ErrorIs(t, waits[0].Err, storage.CodeIOErr|4<<8, "SQLITE_IOERR_FSYNC")
	assert.Len(t, tr.Events("s"), 1, "stored once")
	assert.Equal(t, 1, count(tr, `SELECT count(*) FROM sessions`))

	// The same in a turn: the driver's answer commits late, the terminal
	// follows once.
	d := treetest.NewDriver(2)
	n.Crash()
	n = tr.Boot(d)
	pid := n.Admit("s", "hold")
	<-d.Started
	f.FailLateCommits(1, faultvfs.IOErrWrite)
	d.Release()
	n.IdleDriving()
	assert.Equal(t, 2, f.LateCommits())
	evs := tr.Events("s")
	assert.Len(t, treetest.OfType(evs, event.PromptAdmitted), 1)
	assert.Len(t, treetest.OfType(evs, event.MessageAdded), 2, "the prompt and one answer")
	assert.Len(t, treetest.Terminals(evs), 1)
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assertContiguous(t, evs)
}

// A second connection holding BEGIN IMMEDIATE makes writes meet BUSY past
// their busy timeout; the transaction is rolled back and rerun, and lands
// once the lock is let go.
func TestBusyFromAnotherConnectionIsWaitedOut(t *testing.T) {
	tr := treetest.New(t)
	tr.DB.BusyTimeout = 20 * time.Millisecond
	n := tr.Boot(treetest.NewDriver(1))
	release := tr.HoldWriteLock()
	var err error
	waits := tr.DriveEach(func() {
		_, err = n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "tester"})
	}, func(w retry.Wait) {
		assert.ErrorIs(t, w.Err, storage.CodeBusy)
		if w.Retry == 2 {
			release()
		}
	})
	require.NoError(t, err)
	assert.Len(t, waits, 2)
	assert.Len(t, tr.Events("s"), 1)
}

// Permanent failures are never waited for: a test that never moves the
// clock still gets its error at once.
func TestPermanentFailureIsNotRetried(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(1))
	n.NewSession("s")
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "tester"})
	assert.ErrorIs(t, err, core.ErrConflict)
	assert.Zero(t, tr.Clock.Pending(), "no wait was set")
}

// refuseEpoch is a storage.DB whose transactions fail with err at the
// statement that takes a new epoch.
type refuseEpoch struct {
	storage.DB
	err error
}

func (d refuseEpoch) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	return d.DB.Tx(ctx, func(tx storage.Tx) error { return fn(refuseEpochTx{tx, d.err}) })
}

type refuseEpochTx struct {
	storage.Tx
	err error
}

func (t refuseEpochTx) Exec(query string, args ...any) (int64, error) {
	if strings.HasPrefix(query, "UPDATE tree SET epoch") {
		return 0, t.err
	}
	return t.Tx.Exec(query, args...)
}

// Only storage that is unavailable for now (DESIGN §8) lets a boot serve
// read-only: an epoch write refused for another reason (a permission, a
// corrupt file) fails the boot with that error.
func TestBootFailsOnAPermanentEpochFailure(t *testing.T) {
	tr := treetest.New(t)
	host, _, _ := tr.Host()
	denied := errors.New("attempt to write a readonly database")
	host.DB = refuseEpoch{DB: host.DB, err: denied}
	inst, err := core.Open(ctx, host, tr.Cfg, treetest.NewDriver(1))
	require.ErrorIs(t, err, denied)
	assert.Nil(t, inst)
}

// A turn whose storage goes away for 90 s — longer than the write window —
// ends failed{type:"storage"} once storage returns: the claim is released,
// nothing is duplicated, and the turn is not resumed.
func TestTurnLosingStorageForNinetySecondsEndsFailedStorage(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hold")
	<-d.Started
	outage := tr.Clock.Now()
	f.FailFor(90*time.Second, faultvfs.Full)
	d.Release()
	waits := n.IdleDriving()

	byPolicy := policies(waits)
	assert.Equal(t, 19, byPolicy["write"], "the answer's append spent its write window")
	assert.Positive(t, byPolicy["settlement"], "then the terminal waited on the settlement schedule")
	assert.GreaterOrEqual(t, tr.Clock.Now(), outage+90_000)

	evs := tr.Events(sid)
	assertContiguous(t, evs)
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	require.Equal(t, event.ExecutionFailed, terms[0].Type)
	var fail event.Failed
	require.NoError(t, terms[0].Decode(&fail))
	assert.Equal(t, event.FailStorage, fail.Type)
	assert.Equal(t, "Couldn't save the session: the database or disk is full (SQLITE_FULL).", fail.Message)
	assert.Equal(t, pid, fail.PromptID)
	assert.Len(t, treetest.OfType(evs, event.ExecutionStarted), 1)
	assert.Len(t, treetest.OfType(evs, event.MessageAdded), 1, "the lost answer is not there, the prompt once")
	assert.Equal(t, "failed", tr.PromptState(pid))
	assert.False(t, tr.Claim(sid).Exists, "the claim is released")

	snap, err := n.Inst.Snapshot(ctx, sid, 0, 10)
	require.NoError(t, err)
	assert.Equal(t, core.StatusIdle, snap.Status)
	assert.False(t, snap.ReadOnly)

	rep, err := recovery.Wake(ctx, n.Inst)
	require.NoError(t, err)
	assert.Empty(t, rep.Decisions, "nothing to resume")
	assert.Equal(t, 1, d.Runs())
	assert.Equal(t, "ok", tr.IntegrityCheck())
}

// A turn's terminal whose every attempt on the write schedule was refused,
// the last one only after it had committed (a late IOERR), stands: the
// failed{type:"storage"} that would replace it finds it stored and writes
// nothing, and the queued turn that terminal started runs here at once, a
// start and not a resume.
func TestTerminalStoredByItsLastAttemptIsNotReplaced(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	window := retry.WriteWindow.Milliseconds()
	secondQueued := make(chan struct{})
	started := make(chan string, 2)
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x.Prompt()
		if x.Prompt() != "first" {
			return treetest.Answer(ctx, x)
		}
		<-secondQueued
		out := treetest.Answer(ctx, x)
		// The answer is stored; the terminal meets a full disk for its whole
		// write window, and its last attempt commits and reports failed.
		now := tr.Clock.Now()
		f.FailBetween(now, now+window, faultvfs.Full)
		f.FailLateCommits(1, faultvfs.IOErrWrite)
		return out
	}))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 64)
	defer sub.Close()
	first := n.Admit(sid, "first")
	require.Equal(t, "first", <-started)
	second := n.Admit(sid, "second")
	close(secondQueued)
	waits := n.IdleDriving()

	assert.Equal(t, map[string]int{"write": 19}, policies(waits), "the terminal spent its write window, and nothing waited after it")
	assert.Equal(t, 1, f.LateCommits(), "its last attempt committed late")
	evs := tr.Events(sid)
	assertContiguous(t, evs)
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 2, "one terminal per turn, no failed{storage} added")
	assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
	assert.Equal(t, event.ExecutionSucceeded, terms[1].Type)
	assert.Equal(t, "succeeded", tr.PromptState(first))
	assert.Equal(t, "succeeded", tr.PromptState(second), "the queued turn ran here")
	assert.Len(t, treetest.OfType(evs, event.ExecutionStarted), 2)
	assert.Empty(t, treetest.OfType(evs, event.ExecutionResumed), "the second turn was started, not resumed by a sweep")
	assert.False(t, tr.Claim(sid).Exists)
	assert.False(t, n.Inst.ReadOnly())

	var published []int64
	for len(sub.C) > 0 {
		published = append(published, (<-sub.C).Seq)
	}
	var stored []int64
	for _, ev := range evs[1:] { // all but session.created, written before the subscription
		stored = append(stored, ev.Seq)
	}
	assert.Equal(t, stored, published, "live subscribers heard every event once, the late-committed terminal too")
}

// A graceful stop while the terminal waits on the settlement schedule ends
// the wait, records nothing and keeps the claim; the next boot resumes the
// turn, which then completes.
func TestShutdownDuringTheSettlementWaitKeepsTheClaim(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hold")
	x := <-d.Started
	f.FailFor(time.Hour, faultvfs.Full)
	d.Release()
	closed := false
	tr.DriveEach(n.Idle, func(w retry.Wait) {
		if w.Policy == "settlement" && !closed {
			closed = true
			require.NoError(t, n.Inst.Close(ctx))
		}
	})
	require.True(t, closed, "the settlement wait began")

	c := tr.Claim(sid)
	assert.True(t, c.Exists, "the claim stays")
	assert.Equal(t, x.ID(), c.ExecutionID)
	assert.Empty(t, treetest.Terminals(tr.Events(sid)))
	assert.Equal(t, "running", tr.PromptState(pid))

	f.Heal()
	n2 := tr.Boot(d)
	assert.Equal(t, 1, n2.Report.Count(core.Resume), "the next boot resumes the turn")
	n2.Idle()
	evs := tr.Events(sid)
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
	assert.Len(t, treetest.OfType(evs, event.ExecutionResumed), 1)
	assert.False(t, tr.Claim(sid).Exists)
	assertContiguous(t, evs)
}

// A quota that does not come back within the settlement window ends the
// turn as far as possible: its failure cannot be written, so the claim
// stays, and the tree turns read-only — it serves reads and refuses writes
// at once with ErrReadOnly. When storage returns, the next wake writes the
// owed failed{type:"storage"} (not a resume) and the tree is writable again.
func TestPermanentQuotaMakesTheTreeReadOnly(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hold")
	<-d.Started
	f.FailFor(24*time.Hour, faultvfs.Full)
	d.Release()
	waits := n.IdleDriving()
	assert.Equal(t, int64(treetest.Start)+(retry.WriteWindow+retry.SettlementWindow).Milliseconds(), tr.Clock.Now(),
		"the write window, then the whole settlement window")
	assert.Positive(t, policies(waits)["settlement"])

	require.True(t, n.Inst.ReadOnly())
	assert.False(t, n.Inst.Idle(), "it owes the turn its failure: not to be evicted")
	assert.True(t, tr.Claim(sid).Exists, "its failure could not be written: the claim stays")
	assert.Empty(t, treetest.Terminals(tr.Events(sid)))

	snap, err := n.Inst.Snapshot(ctx, sid, 0, 10)
	require.NoError(t, err, "reads work")
	assert.True(t, snap.ReadOnly)
	assert.Equal(t, core.StatusBusy, snap.Status)

	var admitErr error
	refused := tr.Drive(func() { _, admitErr = n.Inst.Admit(ctx, sid, core.PromptInput{Text: "more"}) })
	assert.ErrorIs(t, admitErr, core.ErrReadOnly)
	assert.ErrorIs(t, admitErr, storage.CodeFull)
	assert.Empty(t, refused, "a read-only tree tries once and does not wait")
	// Driven, so that a read-only tree that waited would fail here rather
	// than hang on the fake clock.
	refused = tr.Drive(func() { _, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser) })
	assert.ErrorIs(t, err, core.ErrReadOnly)
	assert.Empty(t, refused)

	refused = tr.Drive(func() { _, err = recovery.Wake(ctx, n.Inst) })
	assert.ErrorIs(t, err, core.ErrReadOnly, "the sweep cannot write either")
	assert.Empty(t, refused)
	assert.True(t, tr.Claim(sid).Exists)
	assert.NotZero(t, tr.Wake.At(), "the wake-up stays armed while the claim does")

	f.Heal()
	rep, err := recovery.Wake(ctx, n.Inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Settle), "the owed failure, not a resume")
	assert.False(t, n.Inst.ReadOnly())
	assert.True(t, n.Inst.Idle())
	evs := tr.Events(sid)
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	var fail event.Failed
	require.NoError(t, terms[0].Decode(&fail))
	assert.Equal(t, event.FailStorage, fail.Type)
	assert.True(t, strings.HasPrefix(fail.Message, core.StorageFailurePrefix), fail.Message)
	assert.Empty(t, treetest.OfType(evs, event.ExecutionResumed))
	assert.False(t, tr.Claim(sid).Exists)
	assert.Equal(t, "failed", tr.PromptState(pid))
	assert.Equal(t, 1, d.Runs(), "not auto-resumed")

	pid2 := n.Admit(sid, "after")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid2), "writable again")
	assert.Equal(t, "ok", tr.IntegrityCheck())
}

// An instance booted while storage refuses every write takes no epoch and
// serves read-only; its first write that storage takes also takes the
// epoch, and from then on it is an ordinary instance.
func TestBootIsReadOnlyWhenStorageIsFull(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	n.Admit(sid, "first")
	n.Idle()
	before := n.Inst.Epoch()
	n.Crash()

	f.FailFor(time.Hour, faultvfs.Full)
	n2 := tr.Boot(d)
	require.True(t, n2.Inst.ReadOnly())
	assert.Zero(t, n2.Inst.Epoch(), "no epoch taken yet")
	snap, err := n2.Inst.Snapshot(ctx, sid, 0, 10)
	require.NoError(t, err)
	assert.True(t, snap.ReadOnly)
	assert.Len(t, snap.Messages, 2)
	evs, err := n2.Inst.Events(ctx, sid, 0, 0)
	require.NoError(t, err)
	assert.NotEmpty(t, evs)
	// Refused at once, not tried: a write that waited out the storage
	// schedule instead would hang here (the disk stays full for an hour),
	// so a bounded context turns that into a failure naming the wait.
	refuse, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = n2.Inst.Admit(refuse, sid, core.PromptInput{Text: "refused"})
	assert.ErrorIs(t, err, core.ErrReadOnly)
	_, err = n2.Inst.CreateSession(refuse, core.NewSession{ID: "t", Principal: "tester"})
	assert.ErrorIs(t, err, core.ErrReadOnly)

	f.Heal()
	pid := n2.Admit(sid, "second")
	n2.Idle()
	assert.False(t, n2.Inst.ReadOnly())
	assert.Equal(t, before+1, n2.Inst.Epoch(), "the epoch was taken with the first write")
	assert.Equal(t, "succeeded", tr.PromptState(pid))
}

// A read-only boot takes its epoch with its first accepted write. When that
// commit is durable but reported failed (a late IOERR), the instance finds
// the epoch marked as its own on the next try and keeps it, rather than
// taking itself for superseded and refusing every write for good.
func TestReadOnlyBootsLateFailedEpochTakeIsKept(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	n.Admit(sid, "first")
	n.Idle()
	before := n.Inst.Epoch()
	n.Crash()

	n2 := bootReadOnly(t, tr, f, d)
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	_, err := n2.Inst.CreateSession(ctx, core.NewSession{ID: "t", Principal: "tester"})
	require.Error(t, err, "the epoch take's commit is reported failed")
	_, err = n2.Inst.CreateSession(ctx, core.NewSession{ID: "u", Principal: "tester"})
	require.NoError(t, err, "the instance keeps the epoch its failed-looking take stored")
	assert.Equal(t, before+1, n2.Inst.Epoch(), "no epoch wasted, none taken twice")
	pid := n2.Admit(sid, "second")
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
}

// A read-only boot over a tree with a claim still boots; its sweep reports
// that it could not write, and a later wake resumes the turn once storage
// returns.
func TestReadOnlyBootWithAClaimResumesWhenStorageReturns(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hold")
	<-d.Started
	n.Crash()

	f.FailFor(time.Hour, faultvfs.Full)
	n2, err := tr.BootSweepErr(d)
	assert.ErrorIs(t, err, core.ErrReadOnly)
	require.True(t, n2.Inst.ReadOnly())
	assert.NotZero(t, tr.Wake.At(), "the wake-up is armed for the claim")

	f.Heal()
	d.Release()
	rep, err := recovery.Wake(ctx, n2.Inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Resume))
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
}

func assertContiguous(t *testing.T, evs []event.Event) {
	t.Helper()
	ids := map[string]bool{}
	for i, ev := range evs {
		assert.Equal(t, int64(i+1), ev.Seq, "seqs are contiguous")
		assert.False(t, ids[ev.ID], "event id %s appears twice", ev.ID)
		ids[ev.ID] = true
	}
}

// A sweep that meets storage refusing its writes stops at the first claim
// it cannot write: every other claim would meet the same refusal, each
// after waiting out a write schedule of its own (30 s, with a boot waiting
// on them all), and the wake-up's re-arm brings the next try. Once storage
// is back, that wake-up resumes them all.
func TestSweepStopsAtStorageThatTakesNoWrites(t *testing.T) {
	tr, f, d, n := faultTree(t, 8)
	sids := []string{n.NewSession("a"), n.NewSession("b"), n.NewSession("c")}
	for _, sid := range sids {
		n.Admit(sid, "hold")
		<-d.Started
	}
	n.Crash()

	host, _, kdb := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, d) // not swept yet
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })
	f.FailFor(time.Hour, faultvfs.Full)
	start := tr.Clock.Now()
	var sweepErr error
	tr.Drive(func() { _, sweepErr = recovery.Sweep(ctx, inst) })
	require.ErrorIs(t, sweepErr, core.ErrStorageUnavailable)
	assert.Equal(t, 1, strings.Count(sweepErr.Error(), "recover session"), "the sweep stopped at the first claim: %v", sweepErr)
	assert.Equal(t, retry.WriteWindow.Milliseconds(), tr.Clock.Now()-start, "one write schedule waited out, not one per claim")
	for _, sid := range sids {
		assert.True(t, tr.Claim(sid).Exists)
	}

	f.Heal()
	d.Release()
	rep, err := recovery.Wake(ctx, inst)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Count(core.Resume))
	require.NoError(t, inst.WaitIdle(ctx))
	for _, sid := range sids {
		assert.False(t, tr.Claim(sid).Exists, "session %s's turn ended", sid)
	}
}

// A wake-up whose sweep meets storage that takes no writes still re-arms
// as its last act (DESIGN §4 rule 2): the delivered wake-up is used up, and
// without the re-arm the claims would wait for the next boot. Once storage
// heals, the armed wake-up's sweep resumes them.
func TestWakeWhoseSweepFailsStillRearms(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("a")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()

	host, _, kdb := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, d) // not swept yet
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })
	tr.Wake.Take() // the wake-up being delivered
	f.FailFor(time.Hour, faultvfs.Full)
	var wakeErr error
	tr.Drive(func() { _, wakeErr = recovery.Wake(ctx, inst) })
	require.ErrorIs(t, wakeErr, core.ErrStorageUnavailable)
	assert.True(t, tr.Claim(sid).Exists)
	assert.NotZero(t, tr.Wake.At(), "the failed sweep's handler re-armed the wake-up")

	f.Heal()
	d.Release()
	rep, err := recovery.Wake(ctx, inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Resume))
	require.NoError(t, inst.WaitIdle(ctx))
	assert.False(t, tr.Claim(sid).Exists)
}
