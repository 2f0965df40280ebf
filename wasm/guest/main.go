//go:build wasip1

package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"unsafe"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/wasm/abi"
)

func main() {}

// guest is the one tree this instance serves. Exports run on one goroutine
// at a time (wasm has one thread); the goroutines they start run only
// while some export settles.
type guest struct {
	cfg     abi.BootConfig
	configs settings.Configs // cfg.Settings, mapped
	log     *logs.Logger
	db      *db
	clock   *clock
	es      *egresses
	inst    *core.Instance
	handler *api.Handler
	reqs    requests

	mu      sync.Mutex
	watched map[string]bool
	deleted bool // the tree's delete committed: nothing is served for it
	// deleting is set while a delete runs: its instance is closed, and a
	// wake-up meanwhile neither sweeps nor reopens it (reopenLater).
	deleting bool
	// deleteUnread is set when a delete's transaction failed and the
	// read-back could not tell whether it is stored all the same
	// (deleteStored): the reopen finds out (reopen).
	deleteUnread bool
	// superseded is set when a delete found a newer instance owning the
	// tree (core.ErrFenced): its closed instance is never reopened, which
	// would take the tree back from that one.
	superseded    bool
	createdAt     int64 // the root session's created_at once created here (created)
	sweepFailures int   // consecutive failed sweeps (boot or wake), under mu
	// A wake handler's sweep may wait for storage (on the guest's timers)
	// past the wake call that started it: sweeping says it has not
	// returned yet, guarded that a wake-up was armed for it since the last
	// delivery, guards how many were (their delay's exponent). Under mu.
	sweeping, guarded bool
	guards            int

	booting *bootState
	stopped bool
}

type bootState struct {
	done bool
	err  error
	// cut ends the boot's waits for storage (its context): a boot blocked
	// on one is cut once, and its sweep fails (bootResult).
	cut context.CancelFunc
}

var g *guest

// allocs pins the buffers handed to the host by revenant_alloc until the
// export that receives them frees them.
var allocs = map[uintptr][]byte{}

//go:wasmexport revenant_abi_version
func abiVersion() uint32 { return abi.PackVersion(abi.Major, abi.Minor) }

//go:wasmexport revenant_alloc
func alloc(n uint32) unsafe.Pointer {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	p := unsafe.Pointer(unsafe.SliceData(b))
	allocs[uintptr(p)] = b
	return p
}

//go:wasmexport revenant_free
func free(p unsafe.Pointer) { delete(allocs, uintptr(p)) }

// take returns the bytes the host wrote at p (from revenant_alloc) and
// unpins them.
func take(p unsafe.Pointer, n uint32) []byte {
	if n == 0 {
		return nil
	}
	b, ok := allocs[uintptr(p)]
	delete(allocs, uintptr(p))
	if !ok || uint32(len(b)) < n {
		panic(fmt.Sprintf("revenant: %d bytes at %p were not allocated by revenant_alloc", n, p))
	}
	return b[:n]
}

//go:wasmexport revenant_boot
func boot(p unsafe.Pointer, n uint32) int32 {
	b := take(p, n)
	cfg, err := abi.DecodeBootConfig(b)
	if err != nil {
		return fail(abi.StatusError, fmt.Errorf("boot: %w", err))
	}
	if cfg.HostMajor != abi.Major {
		return fail(abi.StatusVersion, fmt.Errorf("boot: host ABI version %d.%d, guest %d.%d: unknown major version", cfg.HostMajor, cfg.HostMinor, abi.Major, abi.Minor))
	}
	if g != nil && g.inst != nil {
		return fail(abi.StatusError, errors.New("boot: already booted"))
	}
	ng, err := newGuest(cfg)
	if err != nil {
		return fail(abi.StatusError, fmt.Errorf("boot: %w", err))
	}
	g = ng
	ctx, cut := context.WithCancel(context.Background())
	st := &bootState{cut: cut}
	g.booting = st
	go func() {
		st.err = g.boot(ctx)
		st.done = true
	}()
	status := settle()
	if status == abi.StatusPending {
		return int32(status) // the host pumps; pump reports the boot's end
	}
	return g.bootResult()
}

// bootResult reports a finished boot once the guest is quiescent.
//
// A boot quiescent but unfinished waits on a timer, which only a later
// export can fire: a write of its sweep's that storage refused (a full
// disk, or another connection's write lock taken after the sweep listed
// the claims) waiting on core's write schedule. Rather than fail the boot,
// and with it every request to the tree until the host boots it again,
// the boot's context is cut: the wait ends, the recovery fails unwritten,
// and the boot's sweep fails as one whose listing failed does (Swept
// counts it, so the re-arm backs off), which serves and leaves the sweep
// to the wake-up swept arms (DESIGN §4 rule 2). The boot cannot wait
// instead: a host boots before it serves anything (host.activate), so a
// boot waiting out the write schedule (30 s) would hold every request.
func (gg *guest) bootResult() int32 {
	st := gg.booting
	if st == nil {
		return int32(abi.StatusIdle)
	}
	if !st.done && st.cut != nil {
		st.cut()
		st.cut = nil
		if settle() == abi.StatusPending {
			return int32(abi.StatusPending) // the host pumps; pump reports the boot's end
		}
	}
	gg.booting = nil
	switch {
	case !st.done:
		return fail(abi.StatusError, errors.New("boot: blocked before it finished"))
	case st.err != nil:
		g = nil
		return fail(abi.StatusError, st.err)
	}
	return int32(abi.StatusIdle)
}

//go:wasmexport revenant_pump
func pump() int32 {
	status := settle()
	if g != nil {
		g.guardSweep(status)
	}
	if status == abi.StatusIdle && g != nil && g.booting != nil {
		return g.bootResult()
	}
	return int32(status)
}

//go:wasmexport revenant_request
func request(id uint64, p unsafe.Pointer, n uint32) int32 {
	b := take(p, n)
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	req, err := abi.DecodeRequest(b)
	if err != nil {
		return fail(abi.StatusError, fmt.Errorf("request: %w", err))
	}
	g.serve(id, req)
	return int32(settle())
}

//go:wasmexport revenant_cancel_request
func cancelRequest(id uint64) int32 {
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	g.cancelRequest(id)
	return int32(settle())
}

//go:wasmexport revenant_wake
func wake() int32 {
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	g.deliverWake()
	return int32(g.guardSweep(settle()))
}

//go:wasmexport revenant_timer
func timer(id uint64) int32 {
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	g.clock.fire(id)
	return int32(settle())
}

//go:wasmexport revenant_egress_response
func egressResponse(id uint64, p unsafe.Pointer, n uint32) int32 {
	b := take(p, n)
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	r, err := abi.DecodeEgressResponse(b)
	if err != nil {
		return fail(abi.StatusError, fmt.Errorf("egress response: %w", err))
	}
	g.es.response(id, r)
	return int32(settle())
}

//go:wasmexport revenant_egress_chunk
func egressChunk(id uint64, p unsafe.Pointer, n uint32) int32 {
	b := take(p, n)
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	g.es.chunk(id, b)
	return int32(settle())
}

//go:wasmexport revenant_egress_end
func egressEnd(id uint64, p unsafe.Pointer, n uint32) int32 {
	b := take(p, n)
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	end, err := abi.DecodeEgressEnd(b, g.cfg.HostMinor)
	if err != nil {
		return fail(abi.StatusError, fmt.Errorf("egress end: %w", err))
	}
	g.es.end(id, end)
	return int32(settle())
}

//go:wasmexport revenant_shutdown
func shutdown() int32 {
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	go func() {
		g.handler.Close()
		if err := g.inst.Close(context.Background()); err != nil {
			g.log.Warn("shutdown", "err", err)
		}
		g.stopped = true
	}()
	return int32(settle())
}

// revenant_idle (ABI 1.1) reports whether an execution runs in the guest
// (core.Instance.Idle: none runs and none is owed a storage failure), so
// a host evicts an idle guest as it would an idle in-process instance. It
// only reads: no goroutine runs, so it answers as of the last export.
//
//go:wasmexport revenant_idle
func idle() int32 {
	if !booted() {
		return int32(abi.StatusNotBooted)
	}
	if g.inst.Idle() {
		return abi.IsIdle
	}
	return abi.NotIdle
}

// revenant_diag_sql (ABI 1.1, diagnostic) runs n statements "SELECT 1" in
// one transaction through the SQL imports, decoding and checking each
// result as core's queries do, then commits: a benchmark of the SQL round
// trip. It runs on the export's goroutine, refused while a transaction of
// the guest's is open (a call that returned pending).
//
//go:wasmexport revenant_diag_sql
func diagSQL(n uint32) int32 {
	d := newDB(nil) // before boot: no transaction of the guest's to wait for
	if g != nil && g.db != nil {
		d = g.db
	}
	if err := d.SelectOnes(int(n)); err != nil {
		return fail(abi.StatusError, fmt.Errorf("diag sql: %w", err))
	}
	return int32(abi.StatusIdle)
}

func booted() bool { return g != nil && g.inst != nil && g.booting == nil }

// fail hands the host the error of the current export.
func fail(s abi.Status, err error) int32 {
	msg := []byte(err.Error())
	p, n := bytesPtr(msg)
	hostFail(p, n)
	return int32(s)
}

// Quiescence (see doc.go): runnable is the number of goroutines ready to
// run other than the one running the export. On wasm's single thread the
// scheduler's count is exact at the moment it is read.
var runnableSample = []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}

// maxRounds bounds one export's scheduling; past it the export returns
// StatusPending and the host pumps again (and its watchdog bounds the
// total), so a goroutine spinning on Gosched cannot hold an export forever.
const maxRounds = 10_000

// settle runs the Go scheduler until every other goroutine is blocked.
func settle() abi.Status {
	for range maxRounds {
		runtime.Gosched()
		metrics.Read(runnableSample)
		if runnableSample[0].Value.Uint64() == 0 {
			return abi.StatusIdle
		}
	}
	return abi.StatusPending
}

// watch forwards the session's live deltas to the emit import. Durable
// events are emitted by the database after commit, for every session.
func (gg *guest) watch(sessionID string) {
	gg.mu.Lock()
	if gg.watched[sessionID] {
		gg.mu.Unlock()
		return
	}
	gg.watched[sessionID] = true
	gg.mu.Unlock()
	go func() {
		for {
			inst := gg.inst
			sub := inst.Subscribe(sessionID, 1024)
			for ev := range sub.C {
				if ev.IsEphemeral() {
					emit(ev)
				}
			}
			if inst.Closed() {
				return
			}
			// Fell behind: deltas are ephemeral, a client re-reads state.
		}
	}()
}

func emit(ev event.Event) {
	b := abi.Emitted{ID: ev.ID, SessionID: ev.SessionID, Seq: ev.Seq, Type: string(ev.Type), At: ev.At, Data: ev.Data}.Encode()
	p, n := bytesPtr(b)
	hostEmit(p, n)
}

// onCommit emits a committed durable event, and starts watching its
// session's deltas if nothing does yet: a new session, or one the boot's
// listing missed (opened).
func (gg *guest) onCommit(ev event.Event) {
	emit(ev)
	if ev.SessionID != "" && gg.inst != nil {
		gg.watch(ev.SessionID)
	}
}

// boot is recovery's boot sequence, the one every host boots through
// (recovery.BootWith), in its announced phases: the instance opens, the
// guest makes ready to serve, then the sweep runs before the first request.
//
// ctx is cut when the boot would wait for storage (bootResult).
func (gg *guest) boot(ctx context.Context) error {
	hostPhase(uint32(abi.PhaseBoot))
	host := core.Host{DB: gg.db, Clock: gg.clock, Wake: waker{}, IDs: ids{}, Log: gg.log}
	cfg, driver, err := gg.coreSetup()
	if err != nil {
		return err
	}
	inst, _, err := recovery.BootWith(ctx, host, cfg, driver, gg.opened)
	if inst == nil {
		return err
	}
	// A sweep that failed: the instance serves anyway; the wake-up
	// retries the sweep.
	gg.swept("boot", err)
	hostPhase(uint32(abi.PhaseServe))
	return nil
}

// opened makes the open instance ready to serve, then announces the sweep.
//
// Its listing of the sessions to watch is one try, as the sweep's listing
// of the claims is, and storage refusing it (another connection's write
// lock held past the busy timeout: the guest's reads begin as writes) does
// not fail the boot, which would fail every request to the tree until the
// host boots it again: the boot serves, and each session is watched from
// the first event of it that this instance commits (onCommit), which comes
// before any delta of its, since a turn starts or resumes with one. A boot
// cannot wait for storage here: no boot export fires the guest's timers
// (bootResult).
func (gg *guest) opened(inst *core.Instance) error {
	gg.inst = inst
	handler, err := gg.apiSetup()
	if err != nil {
		return err
	}
	gg.handler = handler
	if _, _, err := gg.watchListed(inst); err != nil {
		return err
	}
	hostPhase(uint32(abi.PhaseSweep))
	return nil
}

// watchListed watches every session inst lists. The listing is one try,
// and storage refusing it is logged, not returned: each session is then
// watched from its next event (opened). listed reports that the listing
// succeeded, and gone that it has no root session: the tree is positively
// not there (never created yet, or deleted); a listing that failed
// (!listed) says nothing.
func (gg *guest) watchListed(inst *core.Instance) (listed, gone bool, err error) {
	sessions, err := inst.Sessions(context.Background())
	switch {
	case err != nil && !storage.IsTransient(err):
		return false, false, fmt.Errorf("list sessions: %w", err)
	case err != nil:
		gg.log.Warn("list the sessions to watch; each is watched from its next event", "err", err)
		return false, false, nil
	}
	gone = true
	for _, s := range sessions {
		gg.watch(s.ID)
		if s.ID == gg.cfg.TreeID {
			gone = false
		}
	}
	return true, gone, nil
}

// errDeleteUnread fails a reopen that could not read whether the delete
// it follows was stored (reopen).
var errDeleteUnread = errors.New("the tree's listing failed: whether its delete was stored is unknown")

func (gg *guest) isDeleted() bool {
	gg.mu.Lock()
	defer gg.mu.Unlock()
	return gg.deleted
}

// reopenLater arms the wake-up for a tree whose delete failed after it
// closed the instance: the tree stays, its turns stopped with their
// claims, and the wake handler reopens the instance (reopen) to resume
// them.
func (gg *guest) reopenLater() {
	if err := armWake(hostClockNow() + retry.Wake().Delay(0).Milliseconds()); err != nil {
		// The host keeps an unstored wake-up in memory and retries its
		// delivery.
		gg.log.Warn("arm the wake-up of a tree whose delete failed", "err", err)
	}
}

// reopen boots the tree's instance again over its database, as boot does
// (a new epoch, then the sweep that resumes the stopped turns and
// re-arms), after a delete that closed the instance and then failed to
// delete the tree. The API handler stays: it reaches the instance through
// gg.inst. An instance that cannot open leaves the closed one, and the
// wake-up's retry (swept) tries again; once open, it serves even if
// storage refuses its listing of the sessions to watch, as a boot does
// (opened): a reopening failed there would leave the closed instance,
// refusing every write, until a later wake-up on the back-off schedule.
//
// A closed instance that a newer boot superseded is not reopened: its
// delete failed before its fence could tell (its BEGIN refused, say), and
// a reopen would take a new epoch over the instance that owns the tree.
// The reopen opens only while the closed instance owns the tree, checked
// in the transaction that takes the new epoch (core.Reopen), so that an
// instance booting meanwhile is not superseded either; a fenced one is
// superseded, as its delete would have found, and an open that fails
// otherwise is retried on the wake-up.
func (gg *guest) reopen() error {
	ctx := context.Background()
	closed := gg.inst
	host := core.Host{DB: gg.db, Clock: gg.clock, Wake: waker{}, IDs: ids{}, Log: gg.log}
	cfg, driver, err := gg.coreSetup()
	if err != nil {
		return err
	}
	found := false // the reopen found the unread delete stored
	inst, _, err := recovery.ReopenWith(ctx, closed, host, cfg, driver, func(inst *core.Instance) error {
		gg.mu.Lock()
		gg.watched = map[string]bool{} // the closed instance's watches ended with it
		gg.mu.Unlock()
		gg.inst = inst
		listed, gone, err := gg.watchListed(inst)
		if err != nil {
			return err
		}
		gg.mu.Lock()
		defer gg.mu.Unlock()
		switch {
		case !gg.deleteUnread:
		case !listed:
			// Served now, a tree whose delete was stored would be
			// served as one never created (a create would make it
			// again) and the host never told: the reopen fails, the
			// instance closed, and the wake-up's retry reads again.
			return errDeleteUnread
		case gone:
			// The delete was stored after all: the listing read the
			// tree and found no root session. It is done as a delete
			// that knew it, decided here, before the sweep (which may
			// wait for storage while requests are served): nothing is
			// served for the tree (a create of it is refused rather
			// than making it again).
			gg.deleted, gg.deleteUnread, found = true, false, true
		default:
			// The tree is there, its root session read: the delete was
			// not stored, and nothing after this changes that, so the
			// question is settled here, not once the boot has ended
			// well (nothing after this callback fails it: BootWith
			// returns the instance even when its sweep fails). Kept,
			// the flag would be read only by a reopen after the next
			// close of this instance, and each such close is a delete
			// that sets the flag anew (its Close cannot fail: core/api
			// gives it a context that is never cancelled), so the two
			// choices do not differ today; cleared, a later change that
			// closes the instance another way cannot refuse a tree
			// already read for a delete settled long before.
			gg.deleteUnread = false
		}
		return nil
	})
	if inst == nil && errors.Is(err, core.ErrFenced) {
		gg.log.Warn("no reopen: a newer instance owns the tree", "tree", gg.cfg.TreeID, "err", err)
		gg.mu.Lock()
		gg.superseded = true
		gg.mu.Unlock()
		return nil
	}
	if inst == nil {
		return fmt.Errorf("reopen: %w", err)
	}
	if found {
		// The wake-up is cleared, which tells the host the tree is gone
		// (docs/abi.md, wake_clear).
		gg.log.Warn("the reopen found the tree deleted: its delete, answered 503, was stored", "tree", gg.cfg.TreeID)
		hostWakeClear()
		return nil
	}
	return err // a sweep that failed: swept retries it
}

// deliverWake starts the wake-up handler, unless the one a previous
// delivery started is still sweeping: that one re-arms when it returns,
// and guardSweep arms for it meanwhile.
func (gg *guest) deliverWake() {
	gg.mu.Lock()
	defer gg.mu.Unlock()
	gg.guarded = false // the delivered wake-up is used up
	if gg.sweeping {
		return
	}
	gg.sweeping, gg.guards = true, 0
	go gg.wake()
}

// wake is the wake-up handler (DESIGN §4 rule 2): sweep, then re-arm as
// the last act.
func (gg *guest) wake() {
	hostPhase(uint32(abi.PhaseSweep))
	gg.mu.Lock()
	gone, deleting, superseded := gg.deleted, gg.deleting, gg.superseded
	gg.mu.Unlock()
	var err error
	switch {
	case gone || deleting:
		// Nothing to sweep: the tree is gone, or its delete decides
		// (clearing the wake-up, or arming it again as it fails).
	case superseded:
		// The tree is a newer instance's, which sweeps it.
	case gg.inst.Closed():
		err = gg.reopen() // a delete that failed closed it
	default:
		_, err = recovery.Wake(context.Background(), gg.inst)
	}
	gg.swept("wake", err)
	gg.mu.Lock()
	gg.sweeping = false
	gg.mu.Unlock()
	hostPhase(uint32(abi.PhaseServe))
}

// guardSweep runs as a wake call (or the pump that continues it) returns.
// The host has used up the delivered wake-up by then, but a sweep waiting
// for storage has not re-armed yet: a kill or an eviction before it does
// would leave its claims with no wake-up (DESIGN §4 rule 2). So the call
// arms one on the wake schedule, once per delivery; a spurious wake is
// harmless. A pending call has not returned yet: its last pump guards.
func (gg *guest) guardSweep(status abi.Status) abi.Status {
	if status != abi.StatusIdle {
		return status
	}
	gg.mu.Lock()
	if !gg.sweeping || gg.guarded {
		gg.mu.Unlock()
		return status
	}
	gg.guarded = true
	d := retry.Wake().Delay(gg.guards)
	gg.guards++
	gg.mu.Unlock()
	if err := armWake(hostClockNow() + d.Milliseconds()); err != nil {
		// The host keeps an unstored wake-up in memory and retries its
		// delivery; the sweep's own writes fail and retry meanwhile.
		gg.log.Warn("arm the sweep's guard wake-up", "err", err)
	}
	return status
}

// swept ends a sweep. A sweep (or its re-arm) that failed could not tell
// whether work remains, and the wake-up that started it is used up: the
// handler re-arms for a retry, so a claim is never left without a wake-up
// (DESIGN §4 rule 2). The export still succeeds (the instance serves).
// A deleted tree has nothing to retry: a sweep its delete cut short (the
// close ended its wait for storage) fails on the closed instance, and the
// wake-up the delete cleared stays cleared.
func (gg *guest) swept(what string, err error) {
	gg.mu.Lock()
	if err == nil || gg.deleted {
		gg.sweepFailures = 0
		gg.mu.Unlock()
		return
	}
	gg.sweepFailures++
	d := retry.Wake().Delay(gg.sweepFailures - 1)
	gg.mu.Unlock()
	gg.log.Warn(what+" sweep failed; the wake-up retries it", "err", err, "in", d)
	if err := armWake(hostClockNow() + d.Milliseconds()); err != nil {
		// The host keeps an unstored wake-up in memory and counts the
		// delivery failed, so it retries it (host/wake.go).
		gg.log.Warn("arm the sweep's retry wake-up", "err", err)
	}
}
