package runtime_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// failingConn fails every BEGIN while failing is set, as a transient
// storage fault would (IOERR).
type failingConn struct {
	*sqlitedb.Conn
	failing bool
}

func (c *failingConn) Begin() error {
	if c.failing {
		return &storage.Error{Code: 10, Msg: "disk I/O error"}
	}
	return c.Conn.Begin()
}

// bootedOverFailingConn boots a guest (the env's) over a failingConn, not
// failing yet.
func bootedOverFailingConn(t *testing.T) (*env, *failingConn, *runtime.Guest) {
	t.Helper()
	e := newEnv(t, 3, offlineConfig())
	fc := &failingConn{Conn: e.conn}
	g, err := compiled(t).Instantiate(context.Background(), runtime.Options{Conn: fc, Services: e.s})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(context.Background()) })
	e.g = g
	require.NoError(t, g.Boot(context.Background(), e.cfg))
	return e, fc, g
}

// A delivered wake-up is used up (DESIGN §4 rule 2). A wake handler whose
// sweep and re-arm fail on storage cannot tell that no work remains: it
// must leave the wake-up armed (or fail the call), or a host that deletes
// its delivered wake-up row strands the claim.
func TestWakeWhoseSweepFailsLeavesTheWakeupArmed(t *testing.T) {
	e, fc, g := bootedOverFailingConn(t)
	e.createAndPrompt("one two three four five six seven eight")
	require.NotNil(t, e.snapshot().Claim, "the turn holds a claim")

	fc.failing = true
	e.s.log.Reset()
	err := g.Wake(context.Background())
	armed := strings.Contains(e.s.log.String(), "wake_arm ")
	require.True(t, err != nil || armed,
		"the wake handler failed to sweep and re-arm, yet reported success without arming: the claim is left without a wake-up")
}

// A wake handler whose sweep waits for storage (core's write schedule, on
// the guest's timers) is still running when the wake call returns; the
// host has used up the wake-up by then. The call must leave a wake-up
// armed, or a kill or an eviction before the sweep ends strands the claim
// (DESIGN §4 rule 2). Here the claim has no execution: its admission's
// commit was durable but reported failed (a late IOERR), the disk was full
// by the time the rerun found it stored, and the turn's start gave up; the
// sweep's start then waits for the full disk. Each delivery while that
// sweep waits arms again.
func TestWakeWhoseSweepWaitsForStorageLeavesTheWakeupArmed(t *testing.T) {
	e, f := newFaultEnv(t, 4, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())

	f.FailLateCommits(1, faultvfs.IOErrFsync)
	e.next++
	id := e.next
	require.NoError(t, e.g.Request(context.Background(), id, runtime.Request{Method: "POST", Path: "/v1/sessions/" + treeID + "/prompt",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"text":"late admission","id":"p1"}`)}))
	f.FailFor(10*time.Minute, faultvfs.Full)
	e.fireTimers(60_000) // the rerun finds the admission stored; its start gives up
	require.Equal(t, 1, f.LateCommits())
	require.Equal(t, 202, e.s.responses[id].status, e.s.responses[id].body.String())
	snap := e.snapshot()
	require.NotNil(t, snap.Claim, "the admission claimed the session")
	require.Empty(t, snap.Claim.ExecutionID, "the rerun started no execution")

	for delivery := range 3 {
		e.s.wake = 0 // delivered: used up
		require.NoError(t, e.g.Wake(context.Background()))
		require.NotEmpty(t, e.s.timers, "delivery %d: the sweep waits for storage", delivery)
		require.NotZero(t, e.s.wake, "delivery %d: the wake call returned while its sweep waits for storage, with no wake-up armed", delivery)
	}

	// Storage back: the sweep in flight starts the turn, which ends.
	f.Heal()
	e.fireTimers(10 * 60_000)
	snap = e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals())
}

// A boot whose sweep fails still serves, and arms a wake-up to retry the
// sweep (DESIGN §4 rule 2), one retry delay ahead.
func TestBootWhoseSweepFailsArmsARetry(t *testing.T) {
	e := newEnv(t, 3, offlineConfig())
	fc := &failingConn{Conn: e.conn}
	g := instantiateSweepSensing(t, e, fc, func(sweep bool) { fc.failing = sweep }) // only the sweep's storage fails
	require.NoError(t, g.Boot(context.Background(), e.cfg))
	require.Equal(t, runtime.PhaseServe, g.Phase())
	require.Equal(t, e.s.now+time.Second.Milliseconds(), e.s.wake, "the failed sweep's retry")
}

// Each delivery whose sweep fails again re-arms further ahead: the wake
// schedule's delays double from one second, so a tree whose storage is
// down is not woken in a busy loop.
func TestFailingSweepsRetryOnTheWakeSchedule(t *testing.T) {
	e, fc, g := bootedOverFailingConn(t)
	e.createAndPrompt("one two three")

	fc.failing = true
	for _, delay := range []int64{1000, 2000, 4000, 8000} {
		e.s.wake = 0 // delivered: used up
		require.NoError(t, g.Wake(context.Background()))
		require.Equal(t, e.s.now+delay, e.s.wake)
	}
}

// writeRefusingConn refuses every statement that writes while refusing is
// set (a permanent failure, not retried), and serves reads: a disk
// remounted read-only. The wake handler's re-arm, a read, still works.
type writeRefusingConn struct {
	runtime.Conn
	refusing bool
}

func (c *writeRefusingConn) Exec(query string, args []any) (int64, error) {
	if c.refusing {
		return 0, &storage.Error{Code: 8, Msg: "attempt to write a readonly database"}
	}
	return c.Conn.Exec(query, args)
}

// A tree whose sweeps fail while its claims can still be read is woken on
// the wake schedule too, up to a minute apart: the wake handler's last
// re-arm (a read that succeeds) waits out the same backoff instead of
// arming one wake interval (10 s here) ahead, which would win (DESIGN §4).
func TestSweepsRefusedWritesRetryOnTheWakeSchedule(t *testing.T) {
	first := newEnv(t, 3, offlineConfig())
	require.NoError(t, first.boot(runtime.Options{}))
	first.createAndPrompt("one two three") // its turn runs in the first guest

	e := first.sibling(4) // the next guest over the same file
	rc := &writeRefusingConn{Conn: e.conn}
	g := instantiateSweepSensing(t, e, rc, func(sweep bool) { rc.refusing = sweep }) // only the sweeps' writes are refused
	e.g = g
	require.NoError(t, g.Boot(context.Background(), e.cfg)) // its sweep fails
	for failed := 1; failed <= 8; failed++ {
		want := e.s.now + retry.Wake().Delay(failed-1).Milliseconds()
		require.Equal(t, want, e.s.wake, "the wake-up after %d failed sweeps", failed)
		e.s.now, e.s.wake = want, 0 // delivered: used up
		require.NoError(t, g.Wake(context.Background()))
	}
}

// instantiateSweepSensing instantiates the guest over conn, telling
// sweeping before each transaction whether a sweep begins it: a conn whose
// storage fails for the sweeps alone.
func instantiateSweepSensing(t *testing.T, e *env, conn runtime.Conn, sweeping func(bool)) *runtime.Guest {
	t.Helper()
	g, err := compiled(t).Instantiate(context.Background(), runtime.Options{Conn: conn, Services: e.s, Interpose: func(s runtime.Site) error {
		if s.Import == abi.ImportSQLBegin && !s.After {
			sweeping(s.Phase == runtime.PhaseSweep)
		}
		return nil
	}})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(context.Background()) })
	return g
}

// A delete whose transaction fails (the disk full) leaves the tree as it
// was (docs/api.md, DELETE): the DELETE answers 503, the tree is still
// there for the API, the turn the delete stopped keeps its claim and a
// wake-up, and goes on once storage is back; deleting again deletes it.
// (Simulator seed 1 -sessions 20 -kills 210 -deletes 1, session 8: the
// guest marked its tree deleted before the transaction, so the client's
// second DELETE was answered 404 and every request after it too, while
// the rows stayed, and the turn's wake-up was cleared.)
func TestAFailedDeleteLeavesTheTreeAsItWas(t *testing.T) {
	e, f := turnRunning(t)
	require.NotZero(t, e.s.wake, "the turn armed a wake-up")

	f.FailFor(10*time.Minute, faultvfs.Full)
	r := e.deleteUntilAnswered()
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, e.s.wake, "the stopped turn's claim is left without a wake-up")

	f.Heal()
	deltas := len(e.s.emitted("session.text.delta@1"))
	e.deliverWakes(5, 10*60_000)
	snap := e.snapshot() // still there
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals(), "the stopped turn went on")
	require.Greater(t, len(e.s.emitted("session.text.delta@1")), deltas, "the reopened instance's live deltas reach emit")

	r = e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 204, r.status, r.body.String())
	r = e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
	require.Zero(t, e.s.wake, "the deleted tree's wake-up is cleared")
}

// An event stream open while a delete fails: the delete closed the
// instance, and the tree, not deleted, has no other until the wake-up
// reopens it. The stream must wait for that (or end), not spin on the
// closed instance, which leaves the guest never quiescent (its watchdog).
func TestAFailedDeleteWithAnEventStreamOpen(t *testing.T) {
	e, f := turnRunning(t)
	stream := e.do("GET", "/v1/sessions/"+treeID+"/events?after=0", nil)
	require.Equal(t, 200, stream.status, stream.body.String())

	f.FailFor(10*time.Minute, faultvfs.Full)
	r := e.deleteUntilAnswered()
	require.Equal(t, 503, r.status, r.body.String())
	require.True(t, stream.ended, "the stream ends: its client reconnects")

	f.Heal()
	// Until the wake-up reopens it, the tree reads, and refuses writes
	// with a 503 to retry (docs/api.md).
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "more", "id": "p2"})
	require.Equal(t, 503, r.status, r.body.String())
	require.Equal(t, 200, e.do("GET", "/v1/sessions/"+treeID, nil).status)
	again := e.do("GET", "/v1/sessions/"+treeID+"/events?after=0", nil)
	require.Equal(t, 200, again.status, again.body.String())
	require.True(t, again.ended, "a stream of the closed instance catches up and ends")
	e.deliverWakes(5, 10*60_000)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals(), "the stopped turn went on")
}

// A DELETE sent again as soon as the storage heals, before the wake-up
// reopens the instance a failed one closed, deletes the tree (docs/api.md:
// deleting again deletes it); a wake-up delivered after that does nothing.
func TestADeleteAgainBeforeTheWakeDeletes(t *testing.T) {
	e, f := turnRunning(t)
	f.FailFor(10*time.Minute, faultvfs.Full)
	r := e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, e.s.wake)

	f.Heal()
	r = e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 204, r.status, r.body.String())
	require.Zero(t, e.s.wake, "the deleted tree's wake-up is cleared")
	require.NoError(t, e.g.Wake(context.Background())) // a delivery already on its way
	e.fireTimers(10 * 60_000)
	require.Zero(t, e.s.wake, "a deleted tree arms nothing")
	idle, err := e.g.Idle(context.Background())
	require.NoError(t, err)
	require.True(t, idle, "a deleted tree runs nothing")
	require.Empty(t, e.terminals(), "no turn went on")
	r = e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
}

// A wake-up whose reopening fails (the storage still full) is retried on
// the wake schedule until the instance opens and the stopped turn goes on.
func TestAFailedReopenIsRetried(t *testing.T) {
	e, f := turnRunning(t)
	f.FailFor(10*time.Minute, faultvfs.Full)
	r := e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 503, r.status, r.body.String())
	var delays []int64
	for range 3 {
		require.NotZero(t, e.s.wake, "a reopening that failed arms its retry")
		at := e.deliverWake(60_000)
		delays = append(delays, e.s.wake-at)
	}
	require.Equal(t, []int64{1000, 2000, 4000}, delays, "the wake schedule's back-off")

	f.Heal()
	e.deliverWakes(10, 60_000)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals(), "the stopped turn went on")
	require.Equal(t, "idle", e.snapshot().Status)
}

// turnRunning boots a guest over a storage the test can fail and starts
// a turn long enough to be running when the test acts.
func turnRunning(t *testing.T) (*env, *faultvfs.Fault) {
	e, f := newFaultEnv(t, 5, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("one two three four five six seven eight")
	return e, f
}

// deleteUntilAnswered sends the tree's DELETE and runs the timers a
// minute on (the delete's write schedule, when storage refuses it), and
// returns its answer.
func (e *env) deleteUntilAnswered() *response {
	e.t.Helper()
	e.next++
	id := e.next
	require.NoError(e.t, e.g.Request(context.Background(), id, runtime.Request{Method: "DELETE", Path: "/v1/sessions/" + treeID}))
	e.fireTimers(60_000)
	r := e.s.responses[id]
	require.NotNil(e.t, r, "the DELETE was never answered")
	return r
}

// deliverWake delivers the armed wake-up (using it up, as the host does)
// at its time or now, whichever is later, then runs the timers limit ms
// on; it returns when it was delivered.
func (e *env) deliverWake(limit int64) (at int64) {
	e.t.Helper()
	e.s.now = max(e.s.now, e.s.wake)
	at, e.s.wake = e.s.now, 0
	require.NoError(e.t, e.g.Wake(context.Background()))
	e.fireTimers(limit)
	return at
}

// deliverWakes delivers wake-ups (deliverWake) until none is armed, at
// most n.
func (e *env) deliverWakes(n int, limit int64) {
	e.t.Helper()
	for range n {
		if e.s.wake == 0 {
			return
		}
		e.deliverWake(limit)
	}
}

// A failed delete of an idle tree (no turn, so no claim and no wake-up of
// its own) arms the wake-up that reopens the instance it closed: until
// then every write is refused with a 503, and nothing else would ever
// reopen it while the guest runs. Once the wake-up reopened it, the tree
// takes prompts again.
func TestAFailedDeleteOfAnIdleTreeReopensIt(t *testing.T) {
	e, f := newFaultEnv(t, 5, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())
	require.Zero(t, e.s.wake, "an idle tree holds no wake-up")

	f.FailFor(10*time.Minute, faultvfs.Full)
	r = e.deleteUntilAnswered()
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, e.s.wake, "the closed instance's reopening is armed")

	f.Heal()
	e.deliverWakes(5, 60_000)
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "after the failed delete", "id": "p1"})
	require.Equal(t, 202, r.status, r.body.String())
	e.fireTimers(10 * 60_000)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals())
}

// A wake handler whose sweep waits for storage when the tree is deleted
// (the DELETE's close ends that wait, the sweep fails on the closed
// instance) arms nothing afterwards: the deleted tree's wake-up stays
// cleared (docs/abi.md §6), as the Durable Object's swept does
// (durableobject: TestSweptArmsNothingOnceDeleted).
func TestASweepCutByTheTreesDeleteArmsNothing(t *testing.T) {
	e, f := newFaultEnv(t, 4, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())
	// As in TestWakeWhoseSweepWaitsForStorageLeavesTheWakeupArmed: a claim
	// with no execution, whose sweep's start waits for the full disk.
	f.FailLateCommits(1, faultvfs.IOErrFsync)
	e.next++
	require.NoError(t, e.g.Request(context.Background(), e.next, runtime.Request{Method: "POST", Path: "/v1/sessions/" + treeID + "/prompt",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"text":"late admission","id":"p1"}`)}))
	f.FailFor(10*time.Minute, faultvfs.Full)
	e.fireTimers(60_000)
	require.NotNil(t, e.snapshot().Claim)
	e.s.wake = 0 // delivered: used up
	require.NoError(t, e.g.Wake(context.Background()))
	require.NotEmpty(t, e.s.timers, "the sweep waits for storage")

	f.Heal()
	r = e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 204, r.status, r.body.String())
	e.fireTimers(10 * 60_000)
	require.Zero(t, e.s.wake, "the deleted tree's wake-up was armed again")
	r = e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
}

// A boot whose sweep lists the claims but whose recovery then finds
// storage refusing writes (the disk full, or another connection's write
// lock taken after the listing) serves all the same, as a boot whose
// listing fails does: core's write would wait for storage on the guest's
// timers, which no boot export can fire, so the boot used to end "blocked
// before it finished" and fail, and every request to the tree with it,
// reads too, until the host's next boot. The recovery is the wake-up's,
// once storage works again: the stopped turn resumes once and ends once.
func TestBootWhoseRecoveryWaitsForStorageServes(t *testing.T) {
	for name, fault := range map[string]func(t *testing.T, e *env, f *faultvfs.Fault) (refuse, heal func(), reads bool){
		"disk full": func(t *testing.T, e *env, f *faultvfs.Fault) (refuse, heal func(), reads bool) {
			return func() { f.FailFor(10*time.Minute, faultvfs.Full) }, f.Heal, true
		},
		"write lock held": func(t *testing.T, e *env, f *faultvfs.Fault) (refuse, heal func(), reads bool) {
			// Another connection takes the lock (lockFromAnother). The
			// guest's reads wait for it too (BEGIN IMMEDIATE): they are
			// served once the other connection's write ends.
			take, release := e.lockFromAnother()
			return take, release, false
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, f := newFaultEnv(t, 6, offlineConfig())
			require.NoError(t, e.boot(runtime.Options{}))
			e.createAndPrompt("one two three four five six seven eight")
			e.fireTimers(120) // a few words in
			require.NoError(t, e.g.Close(context.Background()))
			clear(e.s.timers) // killed: its timers died with it
			e.s.wake = 0      // the host delivered the wake-up: used up

			refuse, heal, reads := fault(t, e, f)
			refused := false
			err := e.boot(runtime.Options{Interpose: func(s runtime.Site) error {
				if s.Import == abi.ImportSQLCommit && s.After && s.Phase == runtime.PhaseSweep && !refused {
					refused = true // the sweep listed the claims; now storage refuses its writes
					refuse()
				}
				return nil
			}})
			require.NoError(t, err, "the boot failed where its sweep met storage refusing writes")
			require.True(t, refused, "the boot swept")
			require.Equal(t, runtime.PhaseServe, e.g.Phase())
			require.GreaterOrEqual(t, e.s.wake, e.s.now+retry.Wake().Delay(0).Milliseconds(), "the failed sweep's retry, on the wake schedule")
			require.Empty(t, e.s.timers, "nothing waits for storage past the boot")
			if !reads {
				heal()
			}
			snap := e.snapshot() // reads are served
			require.NotNil(t, snap.Claim, "the turn keeps its claim")
			require.Zero(t, e.count("session.execution.resumed@1"), "no recovery was written")
			if reads {
				heal()
			}
			e.deliverWakes(5, 10*60_000)
			snap = e.snapshot()
			require.Equal(t, "idle", snap.Status, "%+v", snap)
			require.Nil(t, snap.Claim)
			require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals(), "the stopped turn went on and ended once")
			require.Equal(t, 1, e.count("session.execution.resumed@1"), "the turn was resumed once")
			var users int
			for _, m := range snap.Messages {
				if m.Role == "user" {
					users++
				}
			}
			require.Equal(t, 1, users, "the prompt is in the conversation once")
		})
	}
}

// count is how many events of type typ are stored.
func (e *env) count(typ string) int {
	e.t.Helper()
	var n int
	err := e.db.Tx(context.Background(), func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT count(*) FROM events WHERE type = ?`, []any{typ}, &n)
		return err
	})
	require.NoError(e.t, err)
	return n
}
