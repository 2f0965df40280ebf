package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Interrupting a root whose parked child waits on a grandchild still at
// work stops the grandchild too, before the interrupt answers: the root's
// transaction ends the child's task turn and both jobs, and the
// grandchild's running task turn is stopped after that commit, as a
// child's is (a campaign through the public API found it running on,
// calling tools and the model after the 200).
func TestInterruptStopsAGrandchildUnderAParkedChild(t *testing.T) {
	tr := treetest.New(t)
	r := offlineTaskRunner(t, tr)
	n := tr.Boot(r)
	n.NewSession("root")
	child := n.Inst.Subscribe("root.1", 64)
	defer child.Close()
	pid := n.Admit("root", "/task /task /sleep 1h")
	waitFor(t, child, event.StepParked) // the child is parked on its task call
	tr.Clock.BlockUntil(3)              // the grandchild sleeps in its step: wall, idle and sleep timers
	require.True(t, n.Inst.RunningHere("root.2"), "the grandchild runs")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only to fail instead of hanging
	defer cancel()
	did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	assert.False(t, n.Inst.RunningHere("root.2"), "the grandchild is stopped before the interrupt answers")
	requireTaskTurnInterruptedByUser(t, tr, "root.2")
	n.Idle()
	assert.False(t, tr.Claim("root.2").Exists, "no claim is left on the grandchild")
}

// failQuery wraps a tree's database and fails, as told, the queries that
// match: a storage fault at one chosen read.
type failQuery struct {
	storage.DB
	match func(query string) bool
	mu    sync.Mutex
	times int   // how many matching queries still fail
	err   error // what they fail with
}

// listing matches the query that lists an interrupted turn's descendants
// to stop (interruptChildren).
func listing(query string) bool { return strings.Contains(query, "WITH RECURSIVE up") }

func (f *failQuery) failNext(times int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.times, f.err = times, err
}

func (f *failQuery) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	return f.DB.Tx(ctx, func(tx storage.Tx) error { return fn(&failQueryTx{Tx: tx, f: f}) })
}

type failQueryTx struct {
	storage.Tx
	f *failQuery
}

func (t *failQueryTx) Query(query string, args ...any) (*storage.Rows, error) {
	if t.f.match(query) {
		t.f.mu.Lock()
		defer t.f.mu.Unlock()
		if t.f.times > 0 {
			t.f.times--
			return nil, t.f.err
		}
	}
	return t.Tx.Query(query, args...)
}

// bootWithFaults boots the offline task runner over a tree whose queries
// that match can be failed.
func bootWithFaults(t *testing.T, match func(string) bool) (*treetest.Tree, *treetest.Node, *failQuery) {
	tr := treetest.New(t)
	faults := &failQuery{match: match}
	tr.WrapDB = func(db storage.DB) storage.DB { faults.DB = db; return faults }
	return tr, tr.Boot(offlineTaskRunner(t, tr)), faults
}

// bootWithListingFaults boots over a tree whose listing of descendants
// can be failed, with root's grandchild asleep in its step under a parked
// child.
func bootWithListingFaults(t *testing.T) (*treetest.Tree, *treetest.Node, *failQuery, string) {
	tr, n, faults := bootWithFaults(t, listing)
	n.NewSession("root")
	pid := n.Admit("root", "/task /task /sleep 1h")
	tr.Clock.BlockUntil(3) // the grandchild sleeps in its step
	require.True(t, n.Inst.RunningHere("root.2"), "the grandchild runs")
	return tr, n, faults, pid
}

// A storage blip when the interrupt lists the descendants to stop is
// waited out: the grandchild is stopped before the interrupt answers, as
// nothing else would stop an execution running here.
func TestInterruptListingDescendantsWaitsOutAStorageBlip(t *testing.T) {
	tr, n, faults, pid := bootWithListingFaults(t)
	faults.failNext(2, &storage.Error{Code: storage.CodeBusy, Msg: "injected"})

	var did bool
	var err error
	waits := tr.Drive(func() { did, err = n.Inst.Interrupt(context.Background(), "root", event.ReasonUser) })
	require.NoError(t, err)
	require.True(t, did)
	assert.NotEmpty(t, waits, "the listing waited for storage")
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	assert.False(t, n.Inst.RunningHere("root.2"), "the grandchild is stopped before the interrupt answers")
	requireTaskTurnInterruptedByUser(t, tr, "root.2")
}

// An interrupt that finds the turn already ended still stops what that
// turn left at work below it, before it answers: here the first
// interrupt could not list the descendants at all (a failure that is not
// waited out), and a second one, with nothing left to interrupt on the
// root, stops the grandchild. The same holds when the second arrives
// while the first is still stopping them.
func TestInterruptWithNothingToStopStillStopsDescendants(t *testing.T) {
	tr, n, faults, pid := bootWithListingFaults(t)
	faults.failNext(1, errors.New("injected: not a storage failure"))

	did, err := n.Inst.Interrupt(context.Background(), "root", event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	require.True(t, n.Inst.RunningHere("root.2"), "the first interrupt could not reach the grandchild")

	did, err = n.Inst.Interrupt(context.Background(), "root", event.ReasonUser)
	require.NoError(t, err)
	assert.False(t, did, "the root had nothing left to interrupt")
	assert.False(t, n.Inst.RunningHere("root.2"), "the grandchild is stopped before the second interrupt answers")
	requireTaskTurnInterruptedByUser(t, tr, "root.2")
	n.Idle()
	assert.False(t, tr.Claim("root.2").Exists, "no claim is left on the grandchild")
}

// A background sub-agent is not stopped by its ancestors' interrupts,
// even below a foreground child whose task turn ended: the walk to the
// descendants to stop goes through ended jobs only, and a background
// child's job runs until its own task turn ends.
func TestInterruptLeavesABackgroundGrandchildAtWork(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(offlineTaskRunner(t, tr))
	n.NewSession("root")
	sub := n.Inst.Subscribe("root", 64)
	defer sub.Close()
	pid := n.Admit("root", "/task /task --background /sleep 1h")
	waitFor(t, sub, event.ExecutionSucceeded) // the child started the grandchild and ended; so did the root
	tr.Clock.BlockUntil(3)                    // the grandchild sleeps in its step
	require.Equal(t, "succeeded", tr.PromptState(pid))
	require.True(t, n.Inst.RunningHere("root.2"), "the background grandchild runs")

	did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
	require.NoError(t, err)
	assert.False(t, did, "the root is idle")
	assert.True(t, n.Inst.RunningHere("root.2"), "the background grandchild still runs")
	assert.Empty(t, treetest.Terminals(tr.Events("root.2")), "its task turn goes on")
}

// waitFor reads sub until an event of type typ (bounded by a generous
// real-time limit, only to fail instead of hanging).
func waitFor(t *testing.T, sub *core.Subscription, typ event.Type) {
	t.Helper()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for {
		select {
		case e, ok := <-sub.C:
			require.True(t, ok, "the subscription closed before %s", typ)
			if e.Type == typ {
				return
			}
		case <-limit.C:
			t.Fatalf("no %s within 30 s", typ)
		}
	}
}

// An interrupt that stopped a running turn says so, though storage
// failed for a moment when it looked at how the turn ended.
func TestInterruptReportsWhatItStoppedThroughAStorageBlip(t *testing.T) {
	tr, n, faults := bootWithFaults(t, func(q string) bool { return q == `SELECT state FROM prompts WHERE id = ?` })
	n.NewSession("root")
	pid := n.Admit("root", "/sleep 1h")
	tr.Clock.BlockUntil(3) // the turn sleeps in its step
	faults.failNext(1, &storage.Error{Code: storage.CodeBusy, Msg: "injected"})

	var did bool
	var err error
	tr.Drive(func() { did, err = n.Inst.Interrupt(ctx, "root", event.ReasonUser) })
	require.NoError(t, err)
	assert.True(t, did, "the interrupt stopped the running turn")
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	faults.mu.Lock()
	defer faults.mu.Unlock()
	assert.Zero(t, faults.times, "the injected failure was met")
}
