package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
)

func TestCreateGetListDelete(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())

	a := e.tree(h, "a")
	e.clock.Advance(time.Millisecond)
	e.tree(h, "d")
	e.tree(h, "b") // same created_at as d: ordered by id
	_, err := h.Create(ctx, "c", "bob", nil)
	require.NoError(t, err)

	got, info, err := h.Get(ctx, "a")
	require.NoError(t, err)
	assert.Same(t, a, got, "one instance per tree")
	assert.Equal(t, api.TreeInfo{RootID: "a", Principal: "alice", CreatedAt: e.clock.Now() - 1}, info)
	_, err = h.Create(ctx, "a", "alice", nil)
	require.ErrorIs(t, err, api.ErrTreeExists)

	page, next, err := h.List(ctx, "alice", "", 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "d"}, rootIDs(page))
	require.NotEmpty(t, next)
	page, next2, err := h.List(ctx, "alice", next, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, rootIDs(page))
	assert.Empty(t, next2, "last page")
	page, _, err = h.List(ctx, "bob", "", 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"c"}, rootIDs(page))
	for _, bad := range []string{"x", "not base64!", "MTIz"} {
		_, _, err = h.List(ctx, "alice", bad, 2)
		require.ErrorIs(t, err, core.ErrInvalid, bad)
	}

	// A turn leaves the tree with a wake-up row and WAL files on disk.
	pid := admit(t, a, "a", "hello")
	idle(t, a)
	assert.Equal(t, "succeeded", e.promptState("a", pid))
	require.Contains(t, e.wakeups(), "a")
	require.True(t, exists(e.treePath("a")+"-wal"))
	assert.Equal(t, 4, h.Stats().Instances)

	require.NoError(t, h.Delete(ctx, "a"))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		assert.False(t, exists(e.treePath("a")+suffix), "a.db%s is gone", suffix)
	}
	assert.NotContains(t, e.wakeups(), "a")
	_, _, err = h.Get(ctx, "a")
	require.ErrorIs(t, err, api.ErrTreeNotFound)
	require.ErrorIs(t, h.Delete(ctx, "a"), api.ErrTreeNotFound)
	page, _, err = h.List(ctx, "alice", "", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "d"}, rootIDs(page))
	assert.Equal(t, 3, h.Stats().Instances)

	// The id is free again, for a new, empty tree.
	fresh, err := h.Create(ctx, "a", "alice", nil)
	require.NoError(t, err)
	_, err = fresh.Session(ctx, "a")
	require.ErrorIs(t, err, core.ErrNotFound)
}

// An id taken by a tree that is not running here is still taken.
func TestCreateTakenIDOfUnloadedTree(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "t")
	require.NoError(t, h.Close(ctx))
	h2 := e.open(e.config())
	_, err := h2.Create(ctx, "t", "mallory", nil)
	require.ErrorIs(t, err, api.ErrTreeExists)
	inst, info, err := h2.Get(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, "alice", info.Principal)
	_, err = inst.Session(ctx, "t")
	require.NoError(t, err, "the tree's file was left alone")
}

// The list pages by (created_at, id), newest first: trees created at the
// same instant are ordered by id, and a cursor inside such a tie goes on
// with the rest of it. Listed one a page, three trees created together
// (and one older) each appear exactly once.
func TestListPagesThroughTreesCreatedAtOneInstant(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "old")
	e.clock.Advance(time.Millisecond)
	for _, id := range []string{"y", "x", "z"} {
		e.tree(h, id)
	}

	assert.Equal(t, []string{"x", "y", "z", "old"}, listAllByOnes(t, h, "alice"), "every tree once, newest first, a tie by id")
}

// listAllByOnes lists every tree of principal, a page of one at a time,
// following the cursors to the end.
func listAllByOnes(t *testing.T, h *host.Host, principal string) []string {
	t.Helper()
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the pages never end")
		page, next, err := h.List(ctx, principal, cursor, 1)
		require.NoError(t, err)
		got = append(got, rootIDs(page)...)
		if next == "" {
			return got
		}
		cursor = next
	}
}

// A cursor this server did not return is invalid, said as the Cloudflare
// front says it (worker.ParseListQuery), with no internal prefix.
func TestListRefusesAForeignCursor(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	_, _, err := h.List(ctx, "alice", "bogus", 1)
	require.ErrorIs(t, err, core.ErrInvalid)
	var ce *core.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, `cursor "bogus" is not one this server returned`, ce.Msg)

	// Text that decodes to a place but is not a cursor's form: "-5:x".
	_, _, err = h.List(ctx, "alice", "LTU6eA", 1)
	require.ErrorIs(t, err, core.ErrInvalid)
}

func rootIDs(trees []api.TreeInfo) []string {
	out := []string{}
	for _, t := range trees {
		out = append(out, t.RootID)
	}
	return out
}

func TestTreeIDValidation(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	for _, id := range []string{"", ".", "..", "../x", "a/b", `a\b`, "a.b", "a b", "ä", "a\x00", strings.Repeat("x", 65), "/etc/passwd"} {
		_, err := h.Create(ctx, id, "alice", nil)
		require.ErrorIs(t, err, host.ErrInvalidTreeID, "%q", id)
		require.ErrorIs(t, err, core.ErrInvalid, "%q", id)
		_, _, err = h.Get(ctx, id)
		require.ErrorIs(t, err, api.ErrTreeNotFound, "%q", id)
		require.ErrorIs(t, h.Delete(ctx, id), api.ErrTreeNotFound, "%q", id)
		assert.False(t, host.ValidTreeID(id), "%q", id)
	}
	ents, err := os.ReadDir(filepath.Join(e.dir, "trees"))
	require.NoError(t, err)
	assert.Empty(t, ents, "no file for an invalid id")
	assert.Zero(t, h.Stats().Boots)

	for _, id := range []string{"a", "Z-9_x", strings.Repeat("x", 64), host.RandomIDs{}.NewID()} {
		assert.True(t, host.ValidTreeID(id), "%q", id)
		_, err := h.Create(ctx, id, "alice", nil)
		require.NoError(t, err, "%q", id)
	}
}

func TestGetUnknownTreeCreatesNoFile(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	_, _, err := h.Get(ctx, "nope")
	require.ErrorIs(t, err, api.ErrTreeNotFound)
	assert.False(t, exists(e.treePath("nope")))
	assert.Empty(t, e.bootedIDs())
	assert.Zero(t, h.Stats().Instances)
}

// After a crash, Open boots exactly the trees with a wake-up row — the ones
// with claims, and one whose last wake-up was not delivered yet — and never
// opens another tree's file.
func TestRestartBootsOnlyTreesWithWakeups(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	for _, id := range []string{"idle1", "idle2", "idle3"} {
		e.tree(h, id)
	}
	prompts := map[string]string{}
	for _, id := range []string{"claimed1", "claimed2"} {
		prompts[id] = admit(t, e.tree(h, id), id, "hold")
		e.d.next(t)
	}
	done := e.tree(h, "done")
	admit(t, done, "done", "hi")
	e.d.next(t)
	idle(t, done)
	assert.Equal(t, map[string]int64{
		"claimed1": treeStart(10 * time.Second), "claimed2": treeStart(10 * time.Second), "done": treeStart(10 * time.Second),
	}, e.wakeups())
	h.Crash()

	h2 := e.open(e.config())
	assert.ElementsMatch(t, []string{"claimed1", "claimed2", "done"}, e.bootedIDs())
	st := h2.Stats()
	assert.Equal(t, 3, st.BootedAtOpen)
	assert.Equal(t, int64(3), st.Boots)
	for _, id := range []string{"idle1", "idle2", "idle3"} {
		assert.True(t, exists(e.treePath(id)))
		assert.False(t, exists(e.treePath(id)+"-wal"), "%s was not opened", id)
	}
	// The two claims resumed; "done" had nothing to do and its used-up
	// wake-up row is gone; the claimed trees' rows were re-armed.
	resumed := map[string]bool{}
	for range 2 {
		x := e.d.next(t)
		assert.Equal(t, event.CauseResume, x.Cause())
		resumed[x.SessionID()] = true
	}
	assert.Equal(t, map[string]bool{"claimed1": true, "claimed2": true}, resumed)
	w := e.wakeups()
	assert.NotContains(t, w, "done")
	assert.Contains(t, w, "claimed1")
	assert.Contains(t, w, "claimed2")

	e.d.Release()
	for id, pid := range prompts {
		inst, _, err := h2.Get(ctx, id)
		require.NoError(t, err)
		idle(t, inst)
		assert.Equal(t, "succeeded", e.promptState(id, pid))
		assert.False(t, e.claimed(id, id))
	}
	assert.Equal(t, int64(3), h2.Stats().Boots, "Get found them running")
}

func treeStart(d time.Duration) int64 { return e0 + d.Milliseconds() }

const e0 = 1767225600000 // treetest.Start

// A prompt answered and then the process killed: the next Open resumes it
// and the turn ends exactly once.
func TestPromptAdmittedThenCrashResumesAfterReopen(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	pid := admit(t, inst, "t", "hold")
	first := e.d.next(t)
	h.Crash()
	assert.True(t, e.claimed("t", "t"))
	assert.Equal(t, "running", e.promptState("t", pid))

	h2 := e.open(e.config())
	x := e.d.next(t)
	assert.Equal(t, pid, x.PromptID())
	assert.NotEqual(t, first.ID(), x.ID())
	assert.Equal(t, 1, x.Attempt())
	e.d.Release()
	inst2, _, err := h2.Get(ctx, "t")
	require.NoError(t, err)
	idle(t, inst2)
	assert.Equal(t, "succeeded", e.promptState("t", pid))
	assert.Equal(t, []event.Type{event.ExecutionSucceeded}, terminalTypes(t, inst2, "t"))
}

// Close is graceful: it records shutdown and keeps the claim, and the next
// Open resumes the turn just as after a crash.
func TestCloseRecordsShutdownAndReopenResumes(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	pid := admit(t, inst, "t", "hold")
	e.d.next(t)
	require.NoError(t, h.Close(ctx))
	_, _, err := h.Get(ctx, "t")
	require.ErrorIs(t, err, core.ErrClosed)

	assert.True(t, e.claimed("t", "t"))
	assert.Contains(t, e.wakeups(), "t")
	h2 := e.open(e.config())
	x := e.d.next(t)
	assert.Equal(t, pid, x.PromptID())
	e.d.Release()
	inst2, _, err := h2.Get(ctx, "t")
	require.NoError(t, err)
	idle(t, inst2)
	assert.Equal(t, "succeeded", e.promptState("t", pid))
	all, err := inst2.Events(ctx, "t", 0, 0)
	require.NoError(t, err)
	var reasons []string
	for _, ev := range all {
		if ev.Type == event.ExecutionInterrupted {
			var in event.Interrupted
			require.NoError(t, ev.Decode(&in))
			reasons = append(reasons, in.Reason)
		}
	}
	assert.Equal(t, []string{event.ReasonShutdown}, reasons)
}

// An evicted tree whose execution died is brought back by its wake-up: the
// timer fires, the host boots the tree, and the turn finishes.
func TestWakeupBootsEvictedTree(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	pid := admit(t, inst, "t", "die once")
	e.d.next(t)
	idle(t, inst)

	e.clock.Advance(time.Minute)
	require.Equal(t, 1, h.EvictIdle(ctx))
	assert.Zero(t, h.Stats().Instances)
	assert.Equal(t, treeStart(time.Hour), e.wakeups()["t"], "eviction keeps the wake-up row")
	assert.Equal(t, []string{"t"}, e.bootedIDs())

	e.clock.Set(treeStart(time.Hour))
	x := e.d.next(t) // booted by the wake-up, resumed by its sweep
	assert.Equal(t, pid, x.PromptID())
	assert.Equal(t, event.CauseResume, x.Cause())
	require.NoError(t, e.nextDelivery().err)
	assert.Equal(t, []string{"t", "t"}, e.bootedIDs())
	inst2, _, err := h.Get(ctx, "t")
	require.NoError(t, err)
	assert.NotSame(t, inst, inst2)
	idle(t, inst2)
	assert.Equal(t, "succeeded", e.promptState("t", pid))
	assert.Equal(t, int64(2), h.Stats().Boots)
}

func TestIdleEvictionClosesIdleInstancesAndKeepsClaimedWakeups(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour) // no wake-up fires during the test
	h := e.open(e.config())
	e.tree(h, "idle")
	claimed := e.tree(h, "claimed")
	admit(t, claimed, "claimed", "die once")
	e.d.next(t)
	idle(t, claimed)
	running := e.tree(h, "running")
	admit(t, running, "running", "hold")
	e.d.next(t)
	e.tree(h, "recent")

	e.clock.Advance(time.Minute - time.Millisecond)
	assert.Zero(t, h.EvictIdle(ctx), "nothing unused for IdleTimeout yet")
	e.clock.Advance(time.Millisecond)
	_, _, err := h.Get(ctx, "recent")
	require.NoError(t, err)
	assert.Equal(t, 2, h.EvictIdle(ctx))
	st := h.Stats()
	assert.Equal(t, 2, st.Instances, "running and recent stay")
	assert.Equal(t, int64(2), st.Evictions)
	w := e.wakeups()
	assert.Contains(t, w, "claimed")
	assert.Contains(t, w, "running")
	assert.NotContains(t, w, "idle")
	assert.True(t, e.claimed("claimed", "claimed"))
	assert.False(t, exists(e.treePath("idle")+"-wal"), "closed")
	assert.True(t, exists(e.treePath("running")+"-wal"), "open")

	// An evicted tree boots again on Get, with its state.
	inst, _, err := h.Get(ctx, "idle")
	require.NoError(t, err)
	_, err = inst.Session(ctx, "idle")
	require.NoError(t, err)
	e.d.Release()
	idle(t, running)
}

// Idle eviction leaves a tree open while a request uses it (a Get whose
// context is not done: an API request in flight, an event stream),
// however long ago the tree was last used: the instance is idle (no
// execution runs), so the request is all that keeps it. Once the request
// ends, the tree is used then and closes IdleTimeout later.
func TestIdleEvictionSparesTreeWithRequestInFlight(t *testing.T) {
	e := newEnv(t)
	released := make(chan string, 16)
	h := e.open(host.WithReleaseHook(e.config(), func(id string) { released <- id }))
	e.tree(h, "a")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, _, err := h.Get(rctx, "a")
	require.NoError(t, err)

	e.clock.Advance(time.Hour) // far past IdleTimeout, the request still held
	assert.Zero(t, h.EvictIdle(ctx), "a tree serving a request is not evicted")
	assert.True(t, e.isOpen("a"))
	assert.Equal(t, 1, h.Stats().Instances)
	assert.Zero(t, h.Stats().Evictions)

	cancel()
	waitReleased(t, released, "a")
	assert.Zero(t, h.EvictIdle(ctx), "the request's end is a use")
	e.clock.Advance(time.Minute)
	assert.Equal(t, 1, h.EvictIdle(ctx))
	assert.False(t, e.isOpen("a"))
}

// No request can start to use a tree while an operation closes it (an
// idle eviction, a close for the cap, a delete): a Get that found the
// entry before the close began must look again and boot the tree afresh,
// never be handed an instance being closed under it.
func TestNoRequestHoldsATreeBeingClosed(t *testing.T) {
	e := newEnv(t)
	var h *host.Host
	heldWhileClosing := map[string]bool{}
	h = e.open(host.WithClosingHook(withCap(e.config(), 2, nil), func(id string) {
		held, release := h.TryHold(id)
		release()
		heldWhileClosing[id] = held
	}))
	for _, id := range []string{"idle", "lru", "gone", "third"} {
		e.tree(h, id)
		held, release := h.TryHold(id)
		assert.True(t, held, "an open tree no operation owns can be used")
		release()
		e.clock.Advance(time.Millisecond)
		if id == "idle" {
			e.clock.Advance(time.Minute)
			require.Equal(t, 1, h.EvictIdle(ctx))
		}
	}
	require.Contains(t, heldWhileClosing, "lru", "the fourth tree closed the least recently used for the cap")
	require.NoError(t, h.Delete(ctx, "gone"))
	for _, id := range []string{"idle", "lru", "gone"} {
		require.Contains(t, heldWhileClosing, id)
		assert.False(t, heldWhileClosing[id], "tree %s was held while it closed", id)
	}
}

// An eviction closes a tree only if it is as it was when the eviction
// chose it: a tree used in between (a request that came and went while
// EvictIdle went through its candidates) is not idle any more and stays
// open, whatever its state under the lock at the close.
func TestEvictionSparesATreeUsedSinceItWasChosen(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "unused")
	e.tree(h, "used")
	e.clock.Advance(time.Minute)

	assert.True(t, h.EvictAfter(ctx, "unused", func() {}), "chosen and unused since: closed")
	assert.False(t, e.isOpen("unused"))
	closed := h.EvictAfter(ctx, "used", func() {
		held, release := h.TryHold("used")
		require.True(t, held)
		release()
	})
	assert.False(t, closed, "used since it was chosen")
	assert.True(t, e.isOpen("used"))
	assert.Zero(t, h.EvictIdle(ctx), "its use was just now")
	e.clock.Advance(time.Minute)
	assert.Equal(t, 1, h.EvictIdle(ctx))
}

// A wake-up delivery that finds the tree running and then loses it to an
// eviction before it can hold it looks again and boots the tree, so the
// wake-up is delivered: the claimed turn resumes.
func TestWakeupOfATreeEvictedUnderItBootsIt(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	var h *host.Host
	var once sync.Once
	h = e.open(host.WithFoundHook(e.config(), func(id string) {
		once.Do(func() { assert.Equal(t, 1, h.EvictIdle(ctx), "evicted before the delivery holds it") })
	}))
	inst := e.tree(h, "t")
	pid := admit(t, inst, "t", "die once")
	e.d.next(t)
	idle(t, inst) // the claim stays, no execution runs: the instance is idle

	e.clock.Set(treeStart(time.Hour))
	x := e.d.next(t) // booted by the delivery's second look, resumed by its sweep
	assert.Equal(t, pid, x.PromptID())
	assert.Equal(t, event.CauseResume, x.Cause())
	require.NoError(t, e.nextDelivery().err)
	assert.Equal(t, []string{"t", "t"}, e.bootedIDs())
	inst2, _, err := h.Get(ctx, "t")
	require.NoError(t, err)
	idle(t, inst2)
	assert.Equal(t, "succeeded", e.promptState("t", pid))
}

// The eviction loop runs on the host clock: no sleeps, no real time.
func TestEvictionLoopRunsOnTheClock(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.ManualEviction = false
	h := e.open(cfg)
	e.tree(h, "t")
	require.Equal(t, 1, e.clock.Pending(), "only the eviction loop's timer")
	e.clock.Advance(time.Minute)
	e.clock.BlockUntil(1) // the loop ran and scheduled its next step
	assert.Zero(t, h.Stats().Instances)
	assert.Equal(t, int64(1), h.Stats().Evictions)
}

func TestConcurrentGetsBootOnce(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "t")
	require.NoError(t, h.Close(ctx))

	gate := make(chan struct{})
	e.setGate(func(string) { <-gate })
	h2 := e.open(e.config())
	const n = 16
	insts := make([]*core.Instance, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			inst, _, err := h2.Get(ctx, "t")
			assert.NoError(t, err)
			insts[i] = inst
		})
	}
	close(gate)
	wg.Wait()
	for _, inst := range insts {
		assert.Same(t, insts[0], inst)
	}
	assert.Equal(t, []string{"t"}, e.bootedIDs())
	assert.Equal(t, int64(1), h2.Stats().Boots)
}

// A wake-up delivered while the turn runs here is used up, and the handler
// re-arms before it ends; the row is never deleted meanwhile.
func TestWakeupWhileRunningRearms(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	pid := admit(t, inst, "t", "hold")
	e.d.next(t)
	e.clock.Advance(10 * time.Second)
	require.NoError(t, e.nextDelivery().err)
	assert.Equal(t, treeStart(20*time.Second), e.wakeups()["t"])
	h.Crash() // the re-armed row brings the turn back

	e.d.Release()
	h2 := e.open(e.config())
	e.d.next(t)
	inst2, _, err := h2.Get(ctx, "t")
	require.NoError(t, err)
	idle(t, inst2)
	assert.Equal(t, "succeeded", e.promptState("t", pid))
}

// The row of a wake-up is deleted only once its delivery has run: a crash
// during the boot that delivers it leaves the row for the next Open.
func TestWakeupRowKeptUntilDeliveryEnds(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	admit(t, inst, "t", "hold")
	e.d.next(t)
	h.Crash()
	row := e.wakeups()["t"]

	inBoot, resume := make(chan struct{}), make(chan struct{})
	e.setGate(func(string) { close(inBoot); <-resume })
	cfg := e.config()
	h2, err := host.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { h2.Close(ctx) })
	<-inBoot
	assert.Equal(t, row, e.wakeups()["t"], "the row stays while it is being delivered")
	e.setGate(nil)
	close(resume)
	<-h2.Recovered()
	e.d.next(t)
	assert.Greater(t, e.wakeups()["t"], int64(0), "re-armed by the boot")
	e.d.Release()
	inst2, _, err := h2.Get(ctx, "t")
	require.NoError(t, err)
	idle(t, inst2)
}

// Deleting an evicted tree removes its files and its wake-up, and its timer
// no longer exists to boot it.
func TestDeleteEvictedTreeWithWakeup(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	admit(t, inst, "t", "die once")
	e.d.next(t)
	idle(t, inst)
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, h.EvictIdle(ctx))
	require.Equal(t, 1, e.clock.Pending(), "the wake-up's timer")
	require.Contains(t, e.wakeups(), "t")

	require.NoError(t, h.Delete(ctx, "t"))
	assert.Zero(t, e.clock.Pending())
	assert.NotContains(t, e.wakeups(), "t")
	assert.False(t, exists(e.treePath("t")))
	_, _, err := h.Get(ctx, "t")
	require.ErrorIs(t, err, api.ErrTreeNotFound)
	assert.Equal(t, []string{"t"}, e.bootedIDs(), "Delete did not boot it")
}

// A delete whose index write fails deletes nothing: the tree stays, and
// its wake-up (row and timer) stays armed, so the execution the delete
// stopped is resumed by the wake-up with no request. Deleting again
// deletes it.
func TestFailedDeleteKeepsTheTreeAndItsWakeup(t *testing.T) {
	e := newEnv(t)
	injected := errors.New("injected: the index could not be written")
	var failing atomic.Bool
	failing.Store(true)
	h := e.open(host.WithDeleteFault(e.config(), func(string) error {
		if failing.Load() {
			return injected
		}
		return nil
	}))
	inst := e.tree(h, "t")
	p := admit(t, inst, "t", "hold")
	e.d.next(t)

	require.ErrorIs(t, h.Delete(ctx, "t"), injected)
	assert.Contains(t, e.wakeups(), "t", "the wake-up's row")
	require.Equal(t, 1, e.clock.Pending(), "the wake-up's timer")
	// The host still knows the timer as the tree's: its Stats count it,
	// and Close stops it.
	assert.Equal(t, 1, h.Stats().Wakeups, "the wake-up, as the host knows it")
	assert.True(t, exists(e.treePath("t")))

	e.d.Release()
	e.clock.Advance(time.Minute)
	x := e.d.next(t) // resumed by the wake-up, with no request
	assert.Equal(t, p, x.PromptID())
	require.Equal(t, "t", e.nextDelivery().id)
	inst2, _, err := h.Get(ctx, "t")
	require.NoError(t, err)
	idle(t, inst2)
	assert.Equal(t, "succeeded", e.promptState("t", p))

	failing.Store(false)
	require.NoError(t, h.Delete(ctx, "t"))
	assert.NotContains(t, e.wakeups(), "t")
	assert.False(t, exists(e.treePath("t")))
}

func TestOpenValidatesConfig(t *testing.T) {
	d := newDriver()
	for name, cfg := range map[string]host.Config{
		"no data dir":        {Driver: d},
		"no driver":          {DataDir: t.TempDir()},
		"negative idle":      {DataDir: t.TempDir(), Driver: d, IdleTimeout: -time.Second},
		"data dir is a file": {DataDir: filepath.Join(writeFile(t), "x"), Driver: d},
	} {
		_, err := host.Open(ctx, cfg)
		require.Error(t, err, name)
	}
}

// A data directory named file:… is refused before anything is created:
// SQLite would open its databases as URIs (file:x/index.db is the file
// index.db of the URI's path x, not of ./file:x), so the host used to make
// ./file:x and then fail on its index. A file: later in the path is a
// path like any other.
func TestOpenRefusesAFileURIDataDir(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, dir := range []string{"file:x", "./file:x", "file:/tmp/x"} {
		_, err := host.Open(ctx, host.Config{DataDir: dir, Driver: newDriver()})
		require.ErrorContains(t, err, "begins with \"file:\", which SQLite reads as a URI, not a path", dir)
		assert.NoDirExists(t, "file:x", dir)
	}
	h, err := host.Open(ctx, host.Config{DataDir: filepath.Join(t.TempDir(), "file:x"), Driver: newDriver()})
	require.NoError(t, err, "an absolute path through file:x")
	require.NoError(t, h.Close(ctx))
}

// SQLite's URI prefix is "file:" in lower case only (it compares bytes), so
// FILE:x is a directory name like any other: refusing it would refuse a
// working path, and its databases are the files under ./FILE:x.
func TestOpenTakesUpperCaseFILEAsADirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	h, err := host.Open(ctx, host.Config{DataDir: "FILE:x", Driver: newDriver()})
	require.NoError(t, err)
	require.NoError(t, h.Close(ctx))
	assert.FileExists(t, filepath.Join("FILE:x", "index.db"))
}

func writeFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	return p
}

// A delivered wake-up that finds nothing to do is used up: its row goes.
func TestWakeupWithoutWorkDeletesRow(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	admit(t, inst, "t", "hi")
	e.d.next(t)
	idle(t, inst)
	require.Contains(t, e.wakeups(), "t")
	e.clock.Advance(10 * time.Second)
	require.NoError(t, e.nextDelivery().err)
	assert.NotContains(t, e.wakeups(), "t")
	assert.Zero(t, h.Stats().Wakeups)
}

// A tree whose boot fails does not stop the host: it is logged, keeps its
// wake-up row, and is retried with backoff.
func TestBootFailureKeepsWakeupAndRetries(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	for _, id := range []string{"bad", "good"} {
		admit(t, e.tree(h, id), id, "hold")
		e.d.next(t)
	}
	h.Crash()
	require.NoError(t, os.WriteFile(e.treePath("bad"), []byte(strings.Repeat("not a database ", 400)), 0o600))

	h2 := e.open(e.config())
	require.Equal(t, "good", e.d.next(t).SessionID())
	st := h2.Stats()
	assert.Equal(t, 2, st.BootedAtOpen)
	assert.Equal(t, int64(1), st.Boots)
	assert.Equal(t, int64(1), st.BootFailures)
	assert.Equal(t, 1, st.Instances)
	assert.Contains(t, e.wakeups(), "bad")
	failed := map[string]bool{}
	for range 2 {
		d := e.nextDelivery()
		failed[d.id] = d.err != nil
	}
	assert.Equal(t, map[string]bool{"bad": true, "good": false}, failed)

	e.clock.Advance(retry.Wake().Delay(0)) // the retry (core/retry.Wake)
	d := e.nextDelivery()
	assert.Equal(t, "bad", d.id)
	require.Error(t, d.err)
	assert.Equal(t, int64(2), h2.Stats().BootFailures)
	assert.Contains(t, e.wakeups(), "bad")

	// Each failure in a row doubles the wait: the next retry's timer is
	// still pending a millisecond before Delay(1), and fires at it.
	pending := e.clock.Pending()
	e.clock.Advance(retry.Wake().Delay(1) - time.Millisecond)
	assert.Equal(t, pending, e.clock.Pending(), "no retry before the backed-off delay")
	e.clock.Advance(time.Millisecond)
	d = e.nextDelivery()
	assert.Equal(t, "bad", d.id)
	require.Error(t, d.err)
	assert.Equal(t, int64(3), h2.Stats().BootFailures)
	_, _, err := h2.Get(ctx, "bad")
	require.Error(t, err)
	e.d.Release()
}

// The wake-up backoff counts failures in a row: once a delivery succeeds,
// the next failure is retried after the first delay again, not after a
// delay grown by failures that were followed by a success.
func TestWakeupBackoffRestartsAfterADelivery(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour) // only the retries fire
	h := e.open(e.config())
	first := admit(t, e.tree(h, "t"), "t", "die once")
	e.d.next(t)
	h.Crash()
	path := e.treePath("t")
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	garbage := []byte(strings.Repeat("not a database ", 400))
	require.NoError(t, os.WriteFile(path, garbage, 0o600))

	h2 := e.open(e.config())
	require.Error(t, e.nextDelivery().err, "the boot at Open fails")
	e.clock.Advance(retry.Wake().Delay(0))
	require.Error(t, e.nextDelivery().err, "two failures in a row")
	require.NoError(t, os.WriteFile(path, good, 0o600))
	e.clock.Advance(retry.Wake().Delay(1))
	assert.Equal(t, first, e.d.next(t).PromptID(), "resumed by the third delivery")
	require.NoError(t, e.nextDelivery().err)
	inst, _, err := h2.Get(ctx, "t")
	require.NoError(t, err)
	idle(t, inst)
	require.Equal(t, "succeeded", e.promptState("t", first))

	// A new claim on the evicted tree, whose file then breaks: its
	// wake-up fails, and the retry comes after the first delay.
	admitted := e.clock.Now()
	admit(t, inst, "t", "die once")
	e.d.next(t)
	idle(t, inst)
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, h2.EvictIdle(ctx))
	require.NoError(t, os.WriteFile(path, garbage, 0o600))
	e.clock.Set(admitted + time.Hour.Milliseconds())
	require.Error(t, e.nextDelivery().err, "the wake-up of the new claim fails")
	pending := e.clock.Pending()
	e.clock.Advance(retry.Wake().Delay(0) - time.Millisecond)
	assert.Equal(t, pending, e.clock.Pending(), "no retry before the first delay")
	e.clock.Advance(time.Millisecond)
	require.Error(t, e.nextDelivery().err, "retried after the first delay, not a grown one")
	assert.Contains(t, e.wakeups(), "t", "the claim's wake-up stays")
}

// The default clock, ids and the real turn runner with the offline model.
func TestRealRunnerWithDefaults(t *testing.T) {
	cfg, h, inst, id := offlineRunnerHost(t, t.TempDir())
	admit(t, inst, id, "hello there")
	idle(t, inst)
	assert.Equal(t, []event.Type{event.ExecutionSucceeded}, terminalTypes(t, inst, id))
	require.NoError(t, h.Close(ctx))

	h2 := openRecovered(t, cfg)
	inst2, info, err := h2.Get(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "alice", info.Principal)
	assert.Equal(t, []event.Type{event.ExecutionSucceeded}, terminalTypes(t, inst2, id))
}

func terminalTypes(t *testing.T, inst *core.Instance, sessionID string) []event.Type {
	t.Helper()
	evs, err := inst.Events(ctx, sessionID, 0, 0)
	require.NoError(t, err)
	var out []event.Type
	for _, ev := range evs {
		if ev.IsTerminal() {
			out = append(out, ev.Type)
		}
	}
	return out
}

// An index written by a newer build is refused before any write.
func TestIndexFromNewerSchemaRefused(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	require.NoError(t, h.Close(ctx))
	// One version ahead is as new as any: a newer server's data is never
	// written by an older one.
	setIndexVersion(t, filepath.Join(e.dir, "index.db"), host.IndexVersion+1)
	_, err := host.Open(ctx, e.config())
	require.ErrorContains(t, err, "newer")
}

// A create whose init fails leaves no tree; a create that died before its
// tree became ready is invisible and removed at the next Open.
func TestUnfinishedCreateNeverVisible(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	_, err := h.Create(ctx, "failed", "alice", func(*core.Instance) error { return errors.New("no root session") })
	require.ErrorContains(t, err, "no root session")
	_, _, err = h.Get(ctx, "failed")
	require.ErrorIs(t, err, api.ErrTreeNotFound)

	// Simulate a crash between the index row and the root session: an init
	// that never returns before the host is abandoned is the same as a row
	// left not ready, so write one directly.
	require.NoError(t, h.Close(ctx))
	db, err := sqlitedb.Open(filepath.Join(e.dir, "index.db"), sqlitedb.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`INSERT INTO trees (id, principal, created_at, ready) VALUES ('ghost', 'alice', 1, 0)`)
		return err
	}))
	require.NoError(t, db.Close())
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "trees", "ghost.db"), []byte("partial"), 0o600))

	h = e.open(e.config())
	trees, _, err := h.List(ctx, "alice", "", 10)
	require.NoError(t, err)
	assert.Empty(t, trees, "an unfinished tree is not listed")
	_, _, err = h.Get(ctx, "ghost")
	require.ErrorIs(t, err, api.ErrTreeNotFound)
	_, err = os.Stat(filepath.Join(e.dir, "trees", "ghost.db"))
	assert.True(t, os.IsNotExist(err), "its file was removed")
}

// A principal's list pages never show another principal's trees, on the
// first page or after a cursor.
func TestListPagesKeepToThePrincipal(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	for _, id := range []string{"a1", "b1", "a2", "b2", "a3"} {
		owner := "alice"
		if id[0] == 'b' {
			owner = "bob"
		}
		inst, err := h.Create(ctx, id, owner, nil)
		require.NoError(t, err)
		_, err = inst.CreateSession(ctx, core.NewSession{ID: id, Principal: owner})
		require.NoError(t, err)
		e.clock.Advance(time.Millisecond)
	}
	assert.Equal(t, []string{"a3", "a2", "a1"}, listAllByOnes(t, h, "alice"))
	assert.Equal(t, []string{"b2", "b1"}, listAllByOnes(t, h, "bob"))
}

// A wake-up timer that fires while a delivery of the tree runs is not lost:
// it is delivered right after that delivery ends, with no more time
// passing (a claim committed during a sweep is served at its time, not one
// wake interval later).
func TestTimerFiringDuringADeliveryIsDeliveredNext(t *testing.T) {
	e := newEnv(t)
	inWake, resume := make(chan struct{}), make(chan struct{})
	var wakes atomic.Int32
	cfg := host.WithWakingHook(e.config(), func(string) {
		if wakes.Add(1) == 1 {
			close(inWake)
			<-resume
		}
	})
	h := e.open(cfg)
	inst := e.tree(h, "t")
	admit(t, inst, "t", "hold")
	e.d.next(t)
	e.clock.Advance(10 * time.Second) // the wake-up: its delivery sweeps the running tree
	<-inWake
	admit(t, inst, "t", "second") // arms a wake-up, one interval ahead
	e.clock.Advance(10 * time.Second)
	// That timer has fired, inside the first delivery: no timer is left for it.
	close(resume)
	require.NoError(t, e.nextDelivery().err)
	require.NoError(t, e.nextDelivery().err, "the timer that fired during the first delivery is delivered next")
	assert.Equal(t, int32(2), wakes.Load())
	e.d.Release()
	idle(t, inst)
}

// A Delete that dies after committing the removal of its index rows and
// before removing the tree's files leaves them behind, and a second
// Delete answers not found before it reaches them. The next Open removes
// them: the files of a tree the index does not know. A file that is no
// tree's is left alone, and so is every tree the index knows.
func TestOpenRemovesTheFilesACutDeleteLeft(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "gone")
	e.tree(h, "kept")
	require.NoError(t, h.Close(ctx))
	// The cut delete: its index rows removed, its files still there.
	read(t, filepath.Join(e.dir, "index.db"), func(tx storage.Tx) error {
		if _, err := tx.Exec(`DELETE FROM trees WHERE id = 'gone'`); err != nil {
			return err
		}
		_, err := tx.Exec(`DELETE FROM wakeups WHERE tree_id = 'gone'`)
		return err
	})
	require.True(t, exists(e.treePath("gone")))
	// A kill leaves SQLite's companions beside the database (a clean close
	// removed them): put them back as a kill would have left them.
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		require.NoError(t, os.WriteFile(e.treePath("gone")+suffix, []byte("left by a kill"), 0o600))
	}
	stray := filepath.Join(e.dir, "trees", "notes.txt")
	require.NoError(t, os.WriteFile(stray, []byte("mine"), 0o600))
	// A database whose name is no tree id: an operator's copy, say.
	copied := filepath.Join(e.dir, "trees", "Backup of kept.db")
	require.NoError(t, os.WriteFile(copied, []byte("mine"), 0o600))

	h = e.open(e.config())
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		assert.False(t, exists(e.treePath("gone")+suffix), "the deleted tree's file %q", suffix)
	}
	assert.True(t, exists(e.treePath("kept")), "a tree the index knows keeps its file")
	assert.True(t, exists(stray), "a file that is no tree's is left alone")
	assert.True(t, exists(copied), "a database named for no tree id is left alone")
	_, _, err := h.Get(ctx, "kept")
	require.NoError(t, err)
	_, _, err = h.Get(ctx, "gone")
	require.ErrorIs(t, err, api.ErrTreeNotFound)
}

// A delete whose index COMMIT is reported failed after it reached the disk
// (a late I/O error) deleted the tree all the same, and the host says so
// and finishes it: nil (204), the files removed and the wake-up's timer
// forgotten. It used to answer the error (503, "the tree stays as it
// was") while the tree was gone for the API (no row: 404, not listed),
// leaving its files until the next Open and its timer to fire for nothing.
func TestDeleteWhoseIndexCommitIsReportedFailedButStoredIsDone(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	fault := e.faultVFS(t, "host-delete-late")
	h := e.open(host.WithVFS(e.config(), "host-delete-late"))
	inst := e.tree(h, "t")
	admit(t, inst, "t", "die once")
	e.d.next(t)
	idle(t, inst)
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, h.EvictIdle(ctx), "closed: the delete's one commit is the index's")
	require.Equal(t, 1, e.clock.Pending(), "the wake-up's timer")

	fault.FailLateCommits(1, faultvfs.IOErrFsync)
	require.NoError(t, h.Delete(ctx, "t"))
	require.Equal(t, 1, fault.LateCommits(), "the index's commit was reported failed after it was durable")
	assert.Zero(t, e.clock.Pending(), "the wake-up's timer is forgotten")
	assert.NotContains(t, e.wakeups(), "t")
	assert.False(t, exists(e.treePath("t")), "the tree's files are removed")
	_, _, err := h.Get(ctx, "t")
	require.ErrorIs(t, err, api.ErrTreeNotFound)
	trees, _, err := h.List(ctx, "alice", "", 0)
	require.NoError(t, err)
	assert.Empty(t, trees)
}

// A delete whose index write fails and is not stored keeps the tree: the
// read-back finds its row, so it is not taken as done (the error, 503).
func TestDeleteWhoseIndexWriteFailsUnstoredKeepsTheTree(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "host-delete-unread")
	h := e.open(host.WithVFS(e.config(), "host-delete-unread"))
	e.tree(h, "t")
	fault.FailFor(time.Hour, faultvfs.Full)
	require.Error(t, h.Delete(ctx, "t"))
	fault.Heal()
	assert.True(t, exists(e.treePath("t")))
	_, err := h.Owner(ctx, "t")
	require.NoError(t, err, "the tree is still listed")
}
