package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// tree is one simulated session: a tree database, the guests booted on it
// one after another (and the zombies left behind), its client, its
// receivers and its nemesis. Everything happens on one goroutine.
type tree struct {
	index int
	seed  uint64 // the campaign's
	rng   *rand.Rand
	mod   *runtime.Module
	boot  runtime.BootConfig
	id    string // the tree's root session id
	path  string
	now   int64
	seq   uint64 // orders things due at the same virtual time

	cur     *guest
	zombies []*guest
	boots   int
	wake    int64 // 0: not armed
	wakeSeq uint64
	// owners maps each epoch to the boot that took it: at boot, or, for a
	// guest that booted read-only (storage full), with its first accepted
	// write. A zombie's commit is past the fence only if a newer boot owns
	// the tree's epoch by then: an older guest that takes the epoch while
	// its successor is still read-only fences that successor instead
	// (core takes a late epoch only if none was taken since boot). An
	// epoch is credited after the COMMIT that made it durable, reported
	// failed or not (noteEpoch), never to a guest that merely read it.
	owners map[int64]int

	work     *workload
	ask      *asker     // the clients of its questions (questions.go)
	children childSends // its clients' prompts to children (childprompt.go)
	quiet    quietChild // its client that interrupts a parked child at quiescence (childprompt.go)
	echoes   *rand.Rand // decides which interrupts an impatient client sends twice
	goesOn   *rand.Rand // decides which clients send a prompt after their interrupt's 5xx (done)
	actions  []action
	created  bool
	reqs     map[uint64]*request
	lost     []*request // requests a dead guest never answered, sent again by the client at lostAt
	lostAt   int64
	nextReq  uint64
	extended int

	killBudget  int
	kills       int
	zombieLeft  int
	zombieCount int
	zombieCalls int // inputs delivered to zombies after their successor booted
	midCall     int // zombies abandoned at an egress start, their successor booted within the call (maybeSupersede)
	ctx         context.Context
	seen        map[runtime.Phase][]string
	hist        Histogram

	fault      *faultvfs.Fault // nil: the disk never fills
	vfs        string          // the fault's VFS name
	diskFulls  int             // windows of a full disk
	stuck      []stuckWindow   // windows in which the user interrupts a stuck turn (watchStuck)
	failedSeen int             // the fault's failed writes when watchStuck last looked

	ledger   check.Ledger
	logged   int64         // the commit position after the last COMMIT any guest tried (guest.tried)
	obs      *sqlite3.Conn // read-only, the simulator's own: reads the commit position (commitPos)
	moments                // what the host watches between transactions (moments.go)
	failures []string
	notes    map[string]Note
	steps    int

	// asked counts the scripted model's requests per step (providerKey),
	// providerFails the failures it answered (provider.go).
	asked         map[string]int
	providerFails int
	// flood draws which of its prompts end in a flooded answer
	// (Config.Flood; nil: none); callDeltas counts the live deltas
	// emitted in the current egress chunk call, floods the flooded
	// answers delivered in a call that returned, fellBehind those whose
	// call emitted fewer deltas than their events (noteFlood).
	flood                          *rand.Rand
	floodShare                     float64
	callDeltas, floods, fellBehind int

	// del is the client that deletes the tree (nil: none; delete.go);
	// delFault fails its delete after the close (nil: never;
	// deletefault.go).
	del      *deleter
	delFault *deleteFaulter
	// bootFault fails the disk within a boot's sweep, bootLock takes the
	// write lock on another connection there (nil: never; bootfault.go);
	// booting is true within a guest's Boot call. lock is the other
	// connection while it holds the lock, busy counts the transactions
	// of the guests' it refused (SQLITE_BUSY).
	bootFault, bootLock *bootFaulter
	booting             bool
	lock                *lockHolder
	busy                int
	// cleanFaults is diskFaults as the last sweep storage refused nothing
	// in began (noteCleanSweep).
	cleanFaults int
	// stop turns some of its fired kill plans into graceful stops (nil:
	// never; stop.go).
	stop *stopper
	// trace receives the tree's trace (Config.Trace; nil: not traced,
	// trace.go).
	trace io.Writer
}

// guest is one instance of the guest module with its own connection.
type guest struct {
	// deltas are the steps whose first live delta it emitted (delta).
	deltas map[check.Delta]bool
	t      *tree
	boot   int
	g      *runtime.Guest
	conn   *conn
	rng    *rand.Rand
	timers map[uint64]due
	egress map[uint64]*reply
	plan   *plan
	zombie bool
	from   int64 // a zombie's commit position when its transaction began
	retire int64 // virtual time a zombie is closed at
	dead   bool
	// sweepArm is the latest wake-up time the guest armed in its sweep
	// phase (0: none since the last was judged): the wake handler's
	// re-arm, its last act (checkSweepArm).
	sweepArm int64
	phase    runtime.Phase // at its latest host call (interpose)
	// sweepFaults is the disk's failed writes and late IOERRs when its
	// latest sweep began (checkSweepArm). txRefused and txLate are the
	// disk's failed writes and late IOERRs when its latest transaction
	// began (check.Commit).
	sweepFaults, txRefused, txLate int
	// listed is set at the first COMMIT of its boot's sweep; faulted is
	// the faulter that made storage refuse writes there (maybeBootFault).
	listed  bool
	faulted *bootFaulter
	// tookEpoch is set at a COMMIT of its, reported done, that took a new
	// epoch in a boot or a reopen (noteEpoch), and cleared at its next
	// BEGIN; epochs counts the epochs it took; atListing says faulted
	// opened at its boot's session listing (maybeListingLock).
	tookEpoch, atListing bool
	epochs               int
	// reopenRefused is set once its reopen's session listing was refused
	// (maybeReopenLock), until a DELETE is sent to it (checkReopenServed).
	reopenRefused bool
	// reopenDue is set once the delete faulter failed its delete's commit
	// after the close, until a DELETE is sent to it again or it takes a
	// new epoch: its next wake-up reopens the closed instance. raceAt is
	// the BEGIN of that reopen (1 or 2, counted in raceBegins) at which
	// its successor boots (maybeRaceReopen; 0: none).
	reopenDue          bool
	raceAt, raceBegins int
	// stopDue is set when a kill plan chose to stop it gracefully
	// (stopInstead); the driver stops it before its next input.
	stopDue bool
}

type due struct {
	at  int64
	seq uint64
}

// reply is the receiver's answer to an egress request, due at a time.
type reply struct {
	due
	status int
	ctype  string      // the answer's Content-Type ("": text/plain)
	header http.Header // more of the answer's header (a Retry-After)
	body   []byte
	errMsg string
	// flood is how many events with text its body streams (floodAnswer),
	// 0 for any other answer.
	flood int
	// tool is set for a tool's webhook request (a graceful stop's moment,
	// stop.go).
	tool bool
}

// request is a client request in flight.
type request struct {
	a      action
	req    runtime.Request
	status int
	body   []byte
	to     *guest
	sent   int64 // the tree's commit position when it was last sent
	// sentEntry is this send's entry in the ledger's InterruptsSent, plus
	// one (0: none): its answer's commit position is written there.
	sentEntry int
	// delEntry is this send's entry, plus one, in the ledger's
	// Delete.Attempts (a DELETE) or Delete.Requests (any other request
	// sent once a DELETE was); 0: none (delete.go).
	delEntry int
}

func newTree(mod *runtime.Module, cfg Config, index int, dir string) *tree {
	rng := stream(cfg.Seed, keyTree, index)
	t := &tree{
		index: index, seed: cfg.Seed, rng: rng, mod: mod, now: start,
		id:     fmt.Sprintf("tree%04d", index),
		path:   filepath.Join(dir, treeFile(index)),
		owners: map[int64]int{}, reqs: map[uint64]*request{},
		killBudget: cfg.killsFor(index),
		seen:       map[runtime.Phase][]string{}, hist: Histogram{},
		ledger: check.Ledger{Tools: ledgerTools, Emits: &check.Emits{From: map[int]int64{}, Settled: map[int]int64{}}},
	}
	t.ledger.Budget = cfg.budgetFor(index)
	if cfg.Trace != nil && cfg.TraceTree == index {
		t.trace = cfg.Trace
	}
	if rng.Float64() < cfg.Zombies {
		t.zombieLeft = 1 + rng.IntN(2)
	}
	// The workload has a generator of its own, so building it first
	// changes nothing the tree's generator draws.
	t.work = &workload{rng: stream(cfg.Seed, keyWorkload, index), multi: cfg.scriptedFor(index)}
	t.actions = append([]action{{at: start, kind: actCreate}}, t.work.batch(start, 3+t.killBudget/3)...)
	if t.del = cfg.deletesFor(index); t.del != nil {
		t.planDelete()
	}
	t.ask = newAsker(cfg.Seed, index, t.killBudget)
	t.quiet = newQuietChild(cfg.Seed, index)
	t.echoes = stream(cfg.Seed, keyEchoes, index)
	t.goesOn = stream(cfg.Seed, keyGoesOn, index)
	if rng.Float64() < cfg.DiskFull {
		t.fillDisk(rng)
	}
	if t.bootFault = cfg.bootFaultFor(index); t.bootFault != nil && t.fault == nil {
		t.newFault()
	}
	t.bootLock = cfg.bootLockFor(index)
	t.stop = cfg.stopsFor(index)
	if cfg.Flood > 0 && t.work.multi {
		t.flood, t.floodShare = stream(cfg.Seed, keyFlood, index), cfg.Flood
	}
	if t.delFault = cfg.deleteFaultFor(index, t.del); t.delFault != nil && t.fault == nil {
		t.newFault()
	}
	t.boot = runtime.BootConfig{
		TreeID: t.id,
		Model:  abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: 40 * time.Millisecond},
		Tools: []abi.ToolDecl{
			{Kind: abi.ToolWebhook, Name: toolHook, Description: "records a delivery; not idempotent", Timeout: 20 * time.Second, Permission: "allow"},
			{Kind: abi.ToolWebhook, Name: toolIHook, Description: "records a delivery; deduplicates by key", Idempotent: true, Timeout: 20 * time.Second, Permission: "allow"},
			{Kind: abi.ToolWebhook, Name: toolAHook, Description: "records a delivery once approved; not idempotent", Timeout: 20 * time.Second, Permission: "ask"},
		},
		Settings: settings.Settings{ResumeBudget: t.ledger.Budget},
	}
	if cfg.finalAskFor(index) {
		t.boot.Permissions = []permission.Rule{{Action: toolAHook, Resource: "*", Decision: permission.Ask, Final: true}}
		t.ledger.FinalAsks = []string{toolAHook}
	}
	if t.work.multi {
		t.boot.Model = abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: scriptedBase, Name: "scripted"}
		// Its provider fails now and then (provider.go), against a small
		// retry budget with short delays.
		t.ledger.Retry = retryPolicy(cfg.retriesFor(index))
		t.boot.Settings.ModelRetries = t.ledger.Retry.Retries
		t.boot.Settings.RetryInitial, t.boot.Settings.RetryMax, t.boot.Settings.MaxRetryAfter = retryInitial, retryMax, maxRetryAfter
	}
	return t
}

// vfsSeq makes VFS names unique in the process (campaigns may run side by
// side in tests); a name is no part of any history.
var vfsSeq atomic.Uint64

// fillDisk gives the tree a few windows of virtual time in which every
// write fails as on a full disk or a failing device, over the stretch its
// workload runs in: each opens within half a second before one of its
// prompts arrives, so that prompt's admission meets it, and so may the
// turn running then and the turns after. (Windows spread over a fixed
// three minutes mostly opened after a short workload had gone quiet, and
// failed nothing; windows opening just after a prompt's admission failed
// nothing when the prompt only queued behind a turn waiting for an
// answer.) Storage
// faults are transient to core: it retries the write, and past its window
// it fails the turn with failed{type:"storage"}.
//
// Each window is bordered, before or after it, by a stretch of late IOERRs
// (lateIOErr): a device that fails writes around that time may also fail
// the flush after a commit reached the disk.
func (t *tree) fillDisk(rng *rand.Rand) {
	t.newFault()
	var prompts []int64
	for _, a := range t.actions {
		if a.kind == actPrompt {
			prompts = append(prompts, a.at)
		}
	}
	for range 1 + rng.IntN(3) {
		// Not before the first boot's instant: the host creates the file
		// then, and a host that cannot create it never runs the tree.
		from := max(prompts[rng.IntN(len(prompts))]-1-int64(rng.IntN(500)), start+1)
		length := int64(600 + rng.IntN(40_000))
		// In half the windows the user interrupts a turn stuck on the
		// full disk (watchStuck). Those windows open a moment after two
		// prompts arrived together, so the first one's turn runs into
		// them with the second queued behind it, and outlast the write
		// schedule (30 s).
		if rng.IntN(2) == 0 {
			from = stuckFrom(rng, prompts)
			length = 31_000 + int64(rng.IntN(10_000))
			t.stuck = append(t.stuck, stuckWindow{from: from, until: from + length})
		}
		code := faultvfs.Full
		if rng.IntN(3) == 0 {
			code = faultvfs.IOErrWrite
		}
		t.fault.FailBetween(from, from+length, code)
		t.diskFulls++
		t.lateIOErr(rng, from, from+length)
	}
}

// newFault gives the tree a disk that fails nothing yet, through a VFS of
// its own.
func (t *tree) newFault() {
	t.fault = faultvfs.New(func() int64 { return t.now })
	t.vfs = fmt.Sprintf("revenant-sim-%d", vfsSeq.Add(1))
	faultvfs.Register(t.vfs, t.fault)
}

// stuckWindow is a disk-full window in which the user interrupts a turn
// stuck on the full disk; seen once a write failed in it.
type stuckWindow struct {
	from, until int64
	seen        bool
}

// stuckFrom is when a stuck window opens: just after the second of two
// prompts that arrive within 300 ms of each other (or, if none do, a
// moment after any prompt).
func stuckFrom(rng *rand.Rand, prompts []int64) int64 {
	var pairs []int64
	for i := 1; i < len(prompts); i++ {
		if prompts[i]-prompts[i-1] <= 300 {
			pairs = append(pairs, prompts[i])
		}
	}
	if len(pairs) == 0 {
		return prompts[rng.IntN(len(prompts))] + 300 + int64(rng.IntN(2_500))
	}
	return pairs[rng.IntN(len(pairs))] + 50 + int64(rng.IntN(400))
}

// watchStuck is the user of a stuck window: once a write failed in it
// (the turn running then meets the full disk), it interrupts 30.5, 34 and
// 40.5 s later, as the turn shows no progress. By then the turn has given
// its write up (the write schedule lasts 30 s) and waits in the storage
// failure that ends it, with the claim lock let go, trying again 1, 2, 4,
// 8 s apart: the interrupt cancels an execution that then ends another
// way, once the window closes, within the interrupt's grace (5 s), and
// starts the next queued turn. An interrupt answered 200 must have stopped
// that one too (check.RuleAfterInterrupt).
func (t *tree) watchStuck() {
	if len(t.stuck) == 0 || t.fault.Failed() == t.failedSeen {
		return
	}
	t.failedSeen = t.fault.Failed()
	for i := range t.stuck {
		w := &t.stuck[i]
		if w.seen || t.now < w.from || t.now >= w.until {
			continue
		}
		w.seen = true
		for _, after := range []int64{30_500, 34_000, 40_500} {
			if t.now+after < w.until+5_000 {
				t.addAction(action{at: t.now + after, kind: actInterrupt})
			}
		}
	}
}

// lateIOErr makes every commit that writes in a stretch of up to three
// seconds just before the window [from, until) opens, or just after it
// closes, durable and reported failed (SQLITE_IOERR_FSYNC), so the guest
// meets commits it must recognise as stored on its rerun, and emit: the
// epoch's among them, which the instance must know for its own.
func (t *tree) lateIOErr(rng *rand.Rand, from, until int64) {
	length := int64(100 + rng.IntN(3000))
	if rng.IntN(2) == 0 {
		t.fault.FailLateBetween(max(from-length, start+1), from, faultvfs.IOErrFsync)
		return
	}
	t.fault.FailLateBetween(until, until+length, faultvfs.IOErrFsync)
}

// run drives the tree to quiescence: nothing due, nothing in flight, every
// client action done, the kill budget spent or the workload extended as far
// as it goes.
func (t *tree) run(ctx context.Context) {
	t.ctx = ctx
	defer t.closeAll(ctx)
	if !t.bootGuest(ctx) {
		return
	}
	for ; ; t.steps++ {
		if err := ctx.Err(); err != nil {
			t.failf("stopped: %v", err)
			return
		}
		if t.steps >= maxSteps || t.now-start > maxVirtual {
			t.failf("no quiescence after %d steps and %s of virtual time", t.steps, time.Duration(t.now-start)*time.Millisecond)
			return
		}
		if t.broken {
			return
		}
		// A graceful stop comes at the virtual time of the input it
		// follows, before anything later is due (stop.go).
		t.maybeStop(ctx)
		at, deliver := t.next()
		if deliver == nil {
			if len(t.reqs) > 0 || len(t.lost) > 0 || len(t.actions) > 0 {
				t.failf("quiescent with %d requests unanswered and %d client actions left", len(t.reqs)+len(t.lost), len(t.actions))
				return
			}
			// Quiescent: nothing will ever boot the tree again unless a
			// client calls, so a claim left now is stranded (and the more
			// prompts below would hide it).
			t.checkStranded()
			if t.deleteWhenQuiet() {
				continue
			}
			if t.deleting() {
				return // deleted: no more work to give it
			}
			if t.interruptQuietChild() || t.listWhenQuiet() {
				continue
			}
			// Spend what is left of the kill budget on more prompts, a few
			// batches at most.
			t.ask.reserve = 0 // no reply to kill in: spend it like the rest
			if t.kills < t.killBudget && t.extended < 12 {
				t.extended++
				t.actions = append(t.actions, t.work.batch(t.now, 3)...)
				continue
			}
			return
		}
		if at > t.now {
			t.now = at
		}
		t.maybeZombie(ctx)
		deliver(ctx)
		t.watchStuck()
		t.dropDeleted()
	}
}

// notef counts something worth knowing that breaks no invariant (a boot
// failed in a disk-full window, a request answered 503), keeping the first
// example of each kind.
func (t *tree) notef(kind, format string, args ...any) {
	if t.notes == nil {
		t.notes = map[string]Note{}
	}
	n := t.notes[kind]
	if n.Count == 0 {
		n.Example = fmt.Sprintf(format, args...)
	}
	n.Count++
	t.notes[kind] = n
}

func route(k actionKind) string {
	switch k {
	case actCreate:
		return "create"
	case actPrompt:
		return "prompt"
	case actList:
		return "questions"
	case actReply:
		return "reply"
	case actDelete:
		return "delete"
	}
	return "interrupt"
}

func (t *tree) failf(format string, args ...any) {
	t.failures = append(t.failures, fmt.Sprintf(format, args...))
}

// next finds the earliest thing due, in (time, sequence) order, and how to
// deliver it. Client actions come first at equal times (sequence 0).
func (t *tree) next() (int64, func(context.Context)) {
	var bestAt int64
	var bestSeq uint64
	var best func(context.Context)
	consider := func(at int64, seq uint64, f func(context.Context)) {
		if best == nil || at < bestAt || (at == bestAt && seq < bestSeq) {
			bestAt, bestSeq, best = at, seq, f
		}
	}
	// Until the tree is created, the create (retried after a 5xx, so maybe
	// behind prompts due earlier) is the only client action.
	for i, a := range t.actions {
		if t.created || a.kind == actCreate {
			consider(a.at, 0, func(ctx context.Context) { t.actions = append(t.actions[:i:i], t.actions[i+1:]...); t.send(ctx, a) })
			break
		}
	}
	if t.wake != 0 {
		consider(t.wake, t.wakeSeq, t.deliverWake)
	}
	if t.lock != nil {
		consider(t.lock.until, 0, func(context.Context) { t.releaseLock() })
	}
	if len(t.lost) > 0 {
		consider(t.lostAt, 0, t.resendLost)
	}
	for _, g := range append([]*guest{t.cur}, t.zombies...) {
		if g == nil {
			continue
		}
		for _, id := range sortedIDs(g.timers) {
			d := g.timers[id]
			consider(d.at, d.seq, func(ctx context.Context) {
				delete(g.timers, id)
				t.call(ctx, g, func() error { return g.g.Timer(ctx, id) })
			})
		}
		for _, id := range sortedIDs(g.egress) {
			r := g.egress[id]
			consider(r.at, r.seq, func(ctx context.Context) { delete(g.egress, id); t.answer(ctx, g, id, r) })
		}
		if g.zombie {
			at := g.retire
			if len(g.timers) == 0 && len(g.egress) == 0 {
				at = t.now // nothing left to do
			}
			consider(at, ^uint64(0), func(ctx context.Context) { t.retire(ctx, g) })
		}
	}
	return bestAt, best
}

func sortedIDs[V any](m map[uint64]V) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// deliverWake delivers the tree's wake-up as the host's wake-up index
// does: to the serving guest's wake handler, or, when none serves (it was
// killed), as a boot, which sweeps and re-arms. A delivered wake-up is used
// up, but only once its delivery has run to its end: one killed in the
// handler is delivered again at once unless the handler armed it anew.
func (t *tree) deliverWake(ctx context.Context) {
	at, seq := t.wake, t.wakeSeq
	t.wake = 0
	defer t.hotWake()
	t.delivering = true
	defer func() { t.delivering = false }()
	g := t.cur
	if g == nil {
		t.tracef("wake-up due %s: no guest serves, the tree boots", traceAt(at))
		t.bootGuest(ctx)
		return
	}
	t.tracef("wake-up due %s delivered to %s", traceAt(at), g.name())
	t.drawReopenRace(g)
	defer func() { g.raceAt = 0 }()
	w := check.Wake{At: t.now, Boot: g.boot, From: t.commitPos(), Waiting: len(g.timers) > 0}
	w.Refused, w.Late = t.diskFaultsApart()
	ok := t.call(ctx, g, func() error { return g.g.Wake(ctx) })
	w.To = t.commitPos()
	t.ledger.Wakes = append(t.ledger.Wakes, w)
	if ok {
		t.checkWakeArmed(g, "after the wake handler returned")
		return
	}
	if t.wake == 0 {
		t.wake, t.wakeSeq = at, seq
	}
}

// answer delivers the receiver's answer to egress id: head, body, end.
func (t *tree) answer(ctx context.Context, g *guest, id uint64, r *reply) {
	if r.errMsg != "" {
		t.tracef("egress %d of %s fails: %s", id, g.name(), r.errMsg)
		t.call(ctx, g, func() error {
			return g.g.EgressEnd(ctx, id, runtime.EgressEnd{Code: abi.EndError, Message: r.errMsg})
		})
		return
	}
	if !t.call(ctx, g, func() error {
		ctype := r.ctype
		if ctype == "" {
			ctype = "text/plain"
		}
		h := http.Header{"Content-Type": {ctype}}
		for k, v := range r.header {
			h[k] = v
		}
		return g.g.EgressResponse(ctx, id, r.status, h)
	}) {
		return
	}
	t.callDeltas = 0
	t.tracef("egress %d of %s answered %d, %d bytes", id, g.name(), r.status, len(r.body))
	if !t.call(ctx, g, func() error { return g.g.EgressChunk(ctx, id, r.body) }) {
		return
	}
	t.noteFlood(r)
	t.call(ctx, g, func() error { return g.g.EgressEnd(ctx, id, runtime.EgressEnd{}) })
}

// call makes one guest call and deals with how it failed. It reports
// whether the guest is still usable.
func (t *tree) call(ctx context.Context, g *guest, f func() error) bool {
	if g == nil || g.dead {
		return false
	}
	if g.zombie {
		t.zombieCalls++
	}
	err := f()
	if err == nil {
		// The call returned with the guest quiet: every delta it
		// published has reached Emit (check.RuleDeltas).
		t.ledger.Emits.Settled[g.boot] = t.logged
		if g == t.cur {
			t.checkWakeDue(g)
			t.checkSweepArm(g)
		}
		return true
	}
	var ge *runtime.GuestError
	switch {
	case errors.As(err, &ge):
		// The guest reported a failure of this input and lives on.
		t.failf("boot %d: %v", g.boot, err)
		t.tracef("%s reported a failure: %v", g.name(), err)
		return true
	case errors.Is(err, errKill):
		t.died(g)
	default:
		t.failf("boot %d died on its own (zombie %v): %v", g.boot, g.zombie, err)
		t.tracef("%s died on its own: %v", g.name(), err)
		t.died(g)
	}
	// A real host boots the tree again only when its wake-up fires or a
	// client calls (deliverWake, resend), not at once: an immediate boot's
	// sweep would hide a lost wake-up.
	return false
}

// guestWatchdog bounds one guest call in wall-clock time: a guest that
// never returns is still reported (a "simulation" violation), but only
// after a bound no healthy call nears even on a starved machine. At one
// minute, a campaign paused (SIGSTOP) or starved of CPU (at nice 19 beside
// busier work) past it reported guests that had only waited as dead:
// session 58 met six such runs, each clean when run again, which made a
// seed's verdict depend on the machine's load as well as on the seed.
const guestWatchdog = 15 * time.Minute

// instantiate starts a guest on a connection of its own.
func (t *tree) instantiate(ctx context.Context) (*guest, error) {
	c, err := openConn(t.path, t.vfs)
	if err != nil {
		return nil, err
	}
	t.boots++
	t.ledger.Emits.From[t.boots] = t.maxGseq(c) // 0 before a boot made the log
	g := &guest{t: t, boot: t.boots, conn: c, timers: map[uint64]due{}, egress: map[uint64]*reply{},
		rng: rand.New(rand.NewPCG(t.rng.Uint64(), t.rng.Uint64()))}
	g.watch()
	if t.mayKill(nil) {
		g.plan = newPlan(t.rng, t.seen, true)
	}
	g.g, err = t.mod.Instantiate(ctx, runtime.Options{Conn: c, Services: g, Interpose: g.interpose, Watchdog: guestWatchdog, Log: g.traceLogger()})
	if err != nil {
		c.close()
		return nil, err
	}
	return g, nil
}

// bootGuest boots a fresh guest over the tree's database, as a host does
// when a client calls or the wake-up fires, until one boots (a boot may
// itself be killed), then resends what the dead guest never answered. It
// reports false, and marks the tree broken, when the tree cannot go on.
func (t *tree) bootGuest(ctx context.Context) bool {
	if !t.bootOnly(ctx) {
		return false
	}
	t.resendLost(ctx)
	return true
}

// bootOnly is bootGuest without the resends.
func (t *tree) bootOnly(ctx context.Context) bool {
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			t.failf("no guest booted after %d attempts", attempt)
			t.broken = true
			return false
		}
		g, err := t.instantiate(ctx)
		if err != nil {
			t.failf("instantiate: %v", err)
			t.broken = true
			return false
		}
		t.cur = g
		t.noteBootAfterDelete(g)
		before := t.beforeBoot()
		t.tracef("%s boots", g.name())
		t.booting = true
		err = g.g.Boot(ctx, t.boot)
		t.booting = false
		if err == nil {
			t.tracef("%s booted", g.name())
			// No noteEpoch here: a boot that took its epoch was credited
			// at its COMMIT (tried), and one that booted read-only took
			// none: the epoch it reads is an older guest's.
			if g.faulted != nil {
				g.faulted.served++
				if g.atListing {
					g.faulted.listingsServed++
				}
			}
			t.afterBoot(g, before)
			t.listAfterBoot()
			break
		}
		t.reap(g)
		t.checkBootServed(g, err)
		if !errors.Is(err, errKill) {
			// A boot that fails (its storage failing, in a disk-full
			// window) is retried by the host after a pause, as a real one
			// would; the pause passes in virtual time.
			t.notef("boot failed, retried later", "boot %d: %v", g.boot, err)
			t.tracef("%s failed to boot, retried later: %v", g.name(), err)
			t.now += min(int64(500)<<min(attempt, 6), 30_000)
			t.releaseDueLock()
		}
	}
	return true
}

// checkBootServed judges a boot that failed with err: one whose sweep met
// a boot fault after it listed the claims (storage refusing writes) must
// serve all the same (wasm/guest bootResult), or every request to the
// tree fails until it boots again; a kill is the nemesis's, not the
// guest's.
func (t *tree) checkBootServed(g *guest, err error) {
	if g.faulted != nil && !errors.Is(err, errKill) {
		t.failf("boot %d failed where its sweep met a boot fault: %v", g.boot, err)
	}
}

// resendLost is the clients sending again what a dead guest never
// answered: to the serving guest, or booting the tree first.
func (t *tree) resendLost(ctx context.Context) {
	if t.cur == nil {
		t.bootGuest(ctx) // resends once booted
		return
	}
	lost := t.lost
	t.lost = nil
	for i, r := range lost {
		if t.cur == nil { // killed meanwhile: the rest waits for the next try
			t.loseRequests(lost[i:]...)
			return
		}
		t.resend(ctx, r)
	}
}

// clientRetry is how long a client whose request died with its guest waits
// before it sends the request again.
const clientRetry = 1000

func (t *tree) loseRequests(rs ...*request) {
	if len(rs) == 0 {
		return
	}
	if len(t.lost) == 0 {
		t.lostAt = t.now + clientRetry
	}
	t.lost = append(t.lost, rs...)
}

// reap forgets a dead guest: its connection closes (SQLite rolls back an
// open transaction, as at a process death), its timers and egress die with
// it, and requests it never answered are resent to its successor.
func (t *tree) reap(g *guest) {
	if g.dead {
		return
	}
	g.dead = true
	t.tracef("%s closed", g.name())
	_ = g.g.Close(context.Background())
	if err := g.conn.close(); err != nil {
		t.failf("close the connection of boot %d: %v", g.boot, err)
	}
	g.timers, g.egress = nil, nil
	if t.cur == g {
		t.cur = nil
	}
	for i, z := range t.zombies {
		if z == g {
			t.zombies = append(t.zombies[:i], t.zombies[i+1:]...)
			break
		}
	}
	for _, id := range sortedIDs(t.reqs) {
		if r := t.reqs[id]; r.to == g {
			delete(t.reqs, id)
			t.loseRequests(r)
		}
	}
}

// maybeZombie abandons the current guest in the middle of its work, the
// way a host that lost track of an instance would, and boots a successor on
// a new connection. The old guest keeps its timers and egress and runs on
// as a zombie: whatever it tries to commit from now on must fail.
func (t *tree) maybeZombie(ctx context.Context) {
	g := t.cur
	if t.zombieLeft == 0 || g == nil || (len(g.timers) == 0 && len(g.egress) == 0) || t.rng.IntN(20) != 0 {
		return
	}
	t.zombieLeft--
	t.abandon(g)
	t.bootGuest(ctx)
}

// abandon makes the serving guest g a zombie: it keeps its timers and
// egress, and the requests it was serving are the client's to send again.
// The caller spends the zombie share's budget (zombieLeft) if it is its.
func (t *tree) abandon(g *guest) {
	t.zombieCount++
	t.tracef("%s abandoned: it runs on as a zombie", g.name())
	g.zombie = true
	g.plan = nil
	g.retire = t.now + int64(10*time.Minute/time.Millisecond)
	t.zombies = append(t.zombies, g)
	t.cur = nil
	for _, id := range sortedIDs(t.reqs) {
		if r := t.reqs[id]; r.to == g {
			delete(t.reqs, id)
			t.loseRequests(r)
		}
	}
	t.diedAt = t.now
}

// maybeSupersede is the nemesis at a serving guest's egress_start, before
// the request goes out: now and then it abandons the guest right there and
// boots its successor within that call, as a second host that took the
// tree over between the guest's last write (the executing record, the
// step started) and its request would. The runtime's epoch check on egress
// (DESIGN §2, §15 zombie egress) must then refuse the request; one that
// gets past it reaches the receiver, which records it as a zombie's
// egress (StartEgress). Zombies abandoned between calls never get here:
// their successor's boot happens before their next input, so core's write
// fence stops them at the write before any request. Trees whose storage
// fails (storageFails) are left out (a boot failing there waits in
// virtual time, which must stand still within a call), and so is a guest
// inside a transaction
// (its successor's boot could not write). A guest within its Boot call (the
// sweep resumed a turn) is superseded too: the end of its fenced egress is
// delivered within that call, which once failed the boot (wasm/runtime's
// TestEgressFencedDuringBootGetsItsEnd).
func (t *tree) maybeSupersede(g *guest, s runtime.Site) bool {
	if s.Import != abi.ImportEgressStart || s.After || s.Phase != runtime.PhaseServe || t.zombieLeft == 0 || t.storageFails() || g != t.cur || g.conn.InTx() {
		return false
	}
	if t.rng.IntN(2) != 0 {
		return false
	}
	t.zombieLeft--
	t.abandon(g)
	t.midCall++
	// The resends wait for the client's retry (lostAt): sent now, they
	// would run inside the zombie's call.
	t.bootOnly(t.ctx)
	return true
}

// retire closes a zombie once it has nothing left to do or its time is up.
func (t *tree) retire(_ context.Context, g *guest) { t.reap(g) }

// send issues a client action to the current guest.
func (t *tree) send(ctx context.Context, a action) {
	var req runtime.Request
	switch a.kind {
	case actCreate:
		req = runtime.Request{Method: http.MethodPost, Path: "/v1/sessions", Body: []byte(`{}`)}
	case actPrompt:
		if a.child != pickNone && a.session == "" {
			var ok bool
			if a, ok = t.toChild(a); !ok {
				return
			}
		}
		id := a.clientID
		if a.reserved {
			id = "notice-" + t.pathOf(a.session) + "-1" // core.NoticeClientID(child, 1)
		}
		text := a.text
		if t.floodAsked() {
			text += "\n" + floodLine
		}
		body, _ := json.Marshal(map[string]string{"text": text, "id": id, "mode": a.mode})
		req = runtime.Request{Method: http.MethodPost, Path: "/v1/sessions/" + t.pathOf(a.session) + "/prompt", Body: body}
	case actInterrupt:
		req = runtime.Request{Method: http.MethodPost, Path: "/v1/sessions/" + t.pathOf(a.session) + "/interrupt", Body: []byte(`{}`)}
		if !a.echo && a.tries == 0 && t.echoes.IntN(3) == 0 {
			// An impatient client interrupts again before the first
			// answer: the second may find the turn ended while the first
			// still stops its sub-agents, and must not answer before them.
			t.addAction(action{at: t.now + 1 + int64(t.echoes.IntN(300)), kind: actInterrupt, session: a.session, echo: true})
		}
	case actList:
		req = runtime.Request{Method: http.MethodGet, Path: "/v1/sessions/" + t.pathOf(a.session) + "/" + listRoute(a.perms)}
	case actReply:
		req = runtime.Request{Method: http.MethodPost, Path: "/v1/sessions/" + t.pathOf(a.reply.path) + "/" + listRoute(a.reply.perm) + "/" + a.reply.question, Body: a.reply.body}
	case actDelete:
		req = runtime.Request{Method: http.MethodDelete, Path: "/v1/sessions/" + t.id}
	}
	if a.ask && !a.reserved { // counted when sent under its own id
		t.ask.asks++
	}
	if a.perms && a.kind == actPrompt && !a.reserved {
		t.ask.permAsks++
	}
	req.Header = http.Header{"Content-Type": {"application/json"}}
	t.resend(ctx, &request{a: a, req: req})
}

func (t *tree) resend(ctx context.Context, r *request) {
	for t.cur == nil { // a client call boots the tree (its resends may kill it again)
		if !t.bootGuest(ctx) {
			t.loseRequests(r)
			return
		}
	}
	g := t.cur
	t.nextReq++
	id := t.nextReq
	r.to, r.status, r.body = g, 0, nil
	if r.a.kind != actCreate && r.a.kind != actPrompt {
		r.sent = t.commitPos()
	}
	t.noteSent(r, g)
	if r.a.kind == actInterrupt && !t.deleted() {
		t.ledger.InterruptsSent = append(t.ledger.InterruptsSent, check.Interrupt{Session: t.pathOf(r.a.session), At: t.now, Sent: r.sent})
		r.sentEntry = len(t.ledger.InterruptsSent)
	}
	t.reqs[id] = r
	t.tracef("client sends %s to %s (request %d)", traceRequest(r), g.name(), id)
	if r.a.kind == actDelete {
		t.aimAtDelete(g)
		t.call(ctx, g, func() error { return g.g.Request(ctx, id, r.req) })
		t.deleteSent(g)
		return
	}
	if r.a.kind != actReply {
		t.call(ctx, g, func() error { return g.g.Request(ctx, id, r.req) })
		return
	}
	t.aimAtReplyCommit(g)
	t.ask.inReply = true
	t.call(ctx, g, func() error { return g.g.Request(ctx, id, r.req) })
	t.replyDone(g)
}

// respond collects a response; at its end the client acts on it.
func (t *tree) respond(id uint64, part runtime.ResponsePart) {
	r := t.reqs[id]
	if r == nil {
		return
	}
	switch part.Kind {
	case abi.PartHead:
		r.status = part.Status
	case abi.PartBody:
		r.body = append(r.body, part.Body...)
	case abi.PartEnd:
		delete(t.reqs, id)
		t.tracef("client gets %d for %s (request %d): %s", r.status, traceRequest(r), id, clipTrace(r.body))
		t.done(r)
	}
}

func (t *tree) done(r *request) {
	if r.sentEntry > 0 {
		t.ledger.InterruptsSent[r.sentEntry-1].Answered = t.commitPos()
	}
	if t.onDeleteAnswer(r) {
		return
	}
	switch r.a.kind {
	case actCreate:
		// A create resent after a kill finds the tree already there.
		if r.status == http.StatusCreated || r.status == http.StatusConflict {
			t.created = true
			return
		}
	case actPrompt:
		if r.a.reserved {
			switch r.status {
			case http.StatusBadRequest:
				// Refused, as it must be: the client sends it again
				// under its own id, now, to the same child.
				t.children.reservedRefused++
				a := r.a
				a.reserved, a.at = false, t.now
				t.addAction(a)
				return
			case http.StatusAccepted:
				t.failf("prompt to %s under the reserved id notice-%s-1 was admitted (%s): a notice's id must be refused", r.a.session, r.a.session, r.body)
				return
			}
			break // 5xx: tried again below, still under the reserved id
		}
		if r.status == http.StatusAccepted {
			var b struct {
				PromptID string `json:"prompt_id"`
			}
			if err := json.Unmarshal(r.body, &b); err != nil || b.PromptID == "" {
				t.failf("prompt %s: 202 with body %q", r.a.clientID, r.body)
				return
			}
			t.ledger.Accepted = append(t.ledger.Accepted, b.PromptID)
			return
		}
	case actInterrupt:
		if r.status == http.StatusOK {
			// Answered only after the interrupt committed: whatever was
			// admitted before the request has ended by now.
			t.ledger.Interrupts = append(t.ledger.Interrupts, check.Interrupt{Session: t.pathOf(r.a.session), At: t.now, Sent: r.sent, Answered: t.commitPos()})
			return
		}
	case actList:
		if r.status == http.StatusOK {
			t.onListing(r)
			return
		}
	case actReply:
		if t.onReply(r) {
			return
		}
	}
	if r.status >= 500 && r.a.tries < 40 {
		// The server could not serve it now (its storage failing): the
		// client tries again later, with the same prompt id.
		t.notef(fmt.Sprintf("%s answered %d, retried later", route(r.a.kind), r.status), "%s %s answered %d: %s",
			r.req.Method, r.req.Path, r.status, strings.TrimSpace(string(r.body)))
		a := r.a
		a.tries++
		a.at = t.now + min(int64(1000)<<min(a.tries, 5), 30_000)
		t.actions = append(t.actions, a)
		if a.kind == actInterrupt && a.tries == 1 && t.goesOn.IntN(2) == 0 {
			// Told that nothing was stored, the client goes on: its next
			// prompt comes before its retry of the interrupt. A turn the
			// interrupt had already told to stop still records the
			// interrupt once storage takes writes, and must spare this
			// prompt (docs/api.md, the interrupt's errors).
			t.actions = append(t.actions, t.work.plain(t.now+50+int64(t.goesOn.IntN(500)), a.session, t.goesOn))
		}
		sortActions(t.actions)
		return
	}
	t.failf("%s %s answered %d: %s", r.req.Method, r.req.Path, r.status, strings.TrimSpace(string(r.body)))
}

func (t *tree) closeAll(ctx context.Context) {
	t.releaseLock()
	if t.fault != nil {
		defer faultvfs.Unregister(t.vfs)
	}
	t.closeProbe()
	if t.obs != nil {
		if err := t.obs.Close(); err != nil {
			t.failf("close the observer connection: %v", err)
		}
		t.obs = nil
	}
	for _, z := range append([]*guest(nil), t.zombies...) {
		t.reap(z)
	}
	if t.cur != nil {
		t.reap(t.cur)
	}
	t.lost = nil
}

// readEpoch reads the tree's current epoch on a guest's connection, between
// its transactions (after a boot, or after the commit an emit follows).
func (t *tree) readEpoch(c *conn) int64 {
	rows, err := c.Query(`SELECT epoch FROM tree`, nil)
	if err != nil || len(rows.Values) != 1 {
		t.failf("read epoch: %v", err)
		return 0
	}
	e, _ := rows.Values[0][0].(int64)
	return e
}

// commitPos is the tree's commit position: the highest events.gseq
// committed so far, read on a connection of the simulator's own, so a
// guest's open transaction is not seen. The ledger places effects and
// answers with it, since virtual time stands still within a guest call.
// 0 means it could not be read (noted).
func (t *tree) commitPos() int64 {
	if t.deleted() {
		return t.del.prePos
	}
	if !t.openObs("commit position unreadable") {
		return 0
	}
	s, _, err := t.obs.Prepare(`SELECT COALESCE(MAX(gseq), 0) FROM events`)
	if err != nil {
		t.notef("commit position unreadable", "prepare: %v", err)
		return 0
	}
	defer s.Close()
	if !s.Step() {
		t.notef("commit position unreadable", "step: %v", s.Err())
		return 0
	}
	return s.ColumnInt64(0)
}

// openObs opens the simulator's own read-only connection (t.obs) if it is
// not open yet; false means it could not, noted as what.
func (t *tree) openObs(what string) bool {
	if t.obs != nil {
		return true
	}
	abs, err := filepath.Abs(t.path)
	if err == nil {
		u := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro"}
		t.obs, err = sqlite3.OpenFlags(u.String(), sqlite3.OPEN_READONLY|sqlite3.OPEN_URI)
	}
	if err != nil {
		t.obs = nil
		t.notef(what, "open: %v", err)
		return false
	}
	return true
}

// committedEpoch is the tree's committed epoch, read on the simulator's
// own connection like commitPos; false means it could not be read (noted).
func (t *tree) committedEpoch() (int64, bool) {
	if !t.openObs("epoch unreadable") {
		return 0, false
	}
	s, _, err := t.obs.Prepare(`SELECT epoch FROM tree`)
	if err != nil {
		t.notef("epoch unreadable", "prepare: %v", err)
		return 0, false
	}
	defer s.Close()
	if !s.Step() {
		t.notef("epoch unreadable", "step: %v", s.Err())
		return 0, false
	}
	return s.ColumnInt64(0), true
}

// Services, one per guest.

var _ runtime.Services = (*guest)(nil)

// Now implements runtime.Services: the tree's virtual clock.
func (g *guest) Now() int64 { return g.t.now }

// SetTimer implements runtime.Services.
func (g *guest) SetTimer(id uint64, at int64) {
	if g.dead {
		return
	}
	g.t.seq++
	g.timers[id] = due{at: at, seq: g.t.seq}
}

// ClearTimer implements runtime.Services.
func (g *guest) ClearTimer(id uint64) {
	if !g.dead {
		delete(g.timers, id)
	}
}

// ArmWake implements runtime.Services. The serving guest owns the tree's
// wake-up, and a zombie's arming goes nowhere once a newer boot owns the
// tree's epoch, as its writes and egress do (fenced). Until then (its
// successor booted read-only and has written nothing yet) the zombie is
// still the tree's writer, whose claims are real, and so is its arming,
// as a Durable Object's alarm is storage that any instance whose writes
// are accepted sets. The wake-up is delivered to the serving guest, whose
// sweep takes the epoch over.
func (g *guest) ArmWake(at int64) error {
	t := g.t
	if g.dead {
		return nil
	}
	if owner := t.owners[t.readEpoch(g.conn)]; g.zombie && owner > g.boot {
		return nil
	}
	t.noteWakeAfterDelete(g, at)
	t.tracef("%s arms the wake-up for %s", g.name(), traceAt(at))
	if g.phase == runtime.PhaseSweep {
		g.sweepArm = at
	}
	if t.wake == 0 || at < t.wake {
		t.seq++
		t.wake, t.wakeSeq = at, t.seq
	}
	return nil
}

// ClearWake implements runtime.Services.
func (g *guest) ClearWake() {
	if !g.zombie && !g.dead {
		g.t.tracef("%s clears the wake-up", g.name())
		g.t.wake = 0
	}
}

// StartEgress implements runtime.Services: the simulator is every tool's
// receiver. A request reaches it at once and is recorded in the ledger
// (applied the way the receiver would); the answer comes back later in
// virtual time, or the receiver fails now and then without applying.
func (g *guest) StartEgress(id uint64, req runtime.EgressRequest) {
	t := g.t
	if g.dead {
		return
	}
	if owner := t.owners[t.readEpoch(g.conn)]; g.zombie && owner > g.boot {
		// The host owns egress, so it must refuse a superseded instance's
		// (DESIGN §2, §15 zombie egress). wasm/runtime checks the epoch
		// before calling StartEgress; the receiver records any request
		// that got past it anyway.
		t.ledger.ZombieCommits = append(t.ledger.ZombieCommits, check.ZombieCommit{At: t.now, Boot: g.boot, Latest: owner,
			What: fmt.Sprintf("egress_start to %s (kind %d)", req.Target, req.Kind)})
	}
	t.noteEgressAfterDelete(g, req.Target, req.Kind)
	t.seq++
	r := &reply{due: due{at: t.now + 20 + int64(t.rng.IntN(3000)), seq: t.seq}, status: http.StatusOK}
	r.tool = req.Kind == abi.EgressTool
	g.egress[id] = r
	t.tracef("%s starts egress %d: %s, answered at %s", g.name(), id, traceEgress(req), traceAt(r.at))
	if req.Kind == abi.EgressModel && t.work.multi {
		if t.providerFailure(r, req.Body) {
			return
		}
		body, streamed, err := scriptedAnswer(req.Body)
		if err != nil {
			r.errMsg = err.Error()
			t.failf("boot %d: egress %d: %v", g.boot, id, err)
			return
		}
		r.ctype, r.body = "application/json", body
		if streamed {
			r.ctype, r.flood = "text/event-stream", floodEvents
		}
		return
	}
	if req.Kind != abi.EgressTool {
		r.errMsg = "the simulator answers tool requests only"
		return
	}
	call, err := abi.DecodeToolCall(req.Body)
	if err != nil {
		r.errMsg = "undecodable tool call: " + err.Error()
		t.failf("boot %d: egress %d: %v", g.boot, id, err)
		return
	}
	idem, known := ledgerTools[req.Target]
	if !known {
		r.errMsg = "no receiver for tool " + req.Target
		return
	}
	if t.rng.IntN(20) == 0 {
		r.errMsg = fmt.Sprintf("webhook %s: 503 Service Unavailable", req.Target)
		return
	}
	d := t.ledger.Record(check.Delivery{At: t.now, Tool: req.Target, CallID: call.ID, Key: call.IdempotencyKey, Idempotent: idem, Boot: g.boot,
		Gseq: t.commitPos()})
	if d.Applied {
		r.body = []byte(fmt.Sprintf("%s applied call %s", req.Target, call.ID))
	} else {
		r.body = []byte(fmt.Sprintf("%s already applied key %s", req.Target, call.IdempotencyKey))
	}
}

// CancelEgress implements runtime.Services.
func (g *guest) CancelEgress(id uint64) {
	if !g.dead {
		delete(g.egress, id)
	}
}

// Emit implements runtime.Services: the ledger records every durable event
// emitted, for the checker to compare with the log (check.RuleEmits), and
// the first live delta of each step (check.RuleDeltas). A zombie's commits
// are judged at its connection (committed), emitted or not.
func (g *guest) Emit(ev runtime.Emitted) {
	if g.dead {
		return
	}
	e := g.t.ledger.Emits
	if !ev.Durable() {
		g.delta(ev)
		return
	}
	e.Events = append(e.Events, check.Emitted{Boot: g.boot, ID: ev.ID, Session: ev.SessionID, Seq: ev.Seq, Type: ev.Type})
	g.t.tracef("%s emits %s #%d of %s", g.name(), ev.Type, ev.Seq, ev.SessionID)
}

// delta records the first live delta of each step the guest emits
// (check.RuleDeltas).
func (g *guest) delta(ev runtime.Emitted) {
	if ev.Type != string(event.TextDelta) {
		return
	}
	g.t.callDeltas++
	var p struct {
		StepID string `json:"step_id"`
	}
	if json.Unmarshal(ev.Data, &p) != nil {
		return
	}
	d := check.Delta{Boot: g.boot, Session: ev.SessionID, Step: p.StepID}
	if g.deltas[d] {
		return
	}
	if g.deltas == nil {
		g.deltas = map[check.Delta]bool{}
	}
	g.deltas[d] = true
	e := g.t.ledger.Emits
	e.Deltas = append(e.Deltas, d)
}

// watch makes the guest's connection report its transactions.
func (g *guest) watch() {
	g.conn.onBegin, g.conn.onCommit, g.conn.onTried = g.began, g.committed, g.tried
	g.conn.onBusy = func() { g.t.busy++ }
	if g.t.del != nil {
		g.conn.onCommitting = g.beforeCommit
	}
}

// tried hears of every COMMIT of the guest's once it returned, reported
// failed or not: events that appeared in the log since the last one are
// the guest's (the simulation of a tree is sequential), which the ledger
// records for the checker (check.Emits.Commits), and so is an epoch that
// appeared (noteEpoch). The log is read on the simulator's own
// connection, which sees committed rows only: a COMMIT that failed before
// it was durable may leave the transaction open.
//
// A zombie's COMMIT reported failed that still left events in the log is
// a commit past the fence like any other if a newer boot owns the epoch;
// committed never hears of it (it hears of commits reported done only).
// One that left no event goes unseen.
func (g *guest) tried(err error) {
	t := g.t
	if err != nil {
		t.tracef("%s COMMIT reported failed: %v", g.name(), err)
	} else {
		t.tracef("%s COMMIT", g.name())
	}
	g.afterCommit()
	owner := t.noteEpoch(g)
	if err != nil {
		// A COMMIT reported failed is retried: the BEGIN after it is no
		// session listing's (maybeListingLock).
		g.tookEpoch = false
	}
	pos := t.commitPos()
	if pos <= t.logged {
		return
	}
	if err != nil && g.zombie && owner > g.boot {
		g.pastFence(owner, "a transaction reported failed but durable")
	}
	e := t.ledger.Emits
	e.Commits = append(e.Commits, check.Commit{Boot: g.boot, From: t.logged, To: pos, Refused: g.txRefused, Late: g.txLate, Failed: err != nil})
	t.logged = pos
}

func (g *guest) began() {
	g.t.tracef("%s BEGIN: takes the write lock", g.name())
	g.txRefused, g.txLate = g.t.diskFaultsApart()
	if g.zombie {
		g.from = g.t.maxGseq(g.conn)
	}
}

// noteEpoch reads the tree's committed epoch after a COMMIT of g's; an
// epoch nobody owned yet was taken by g just now (the simulation of a tree
// is sequential). It runs after every COMMIT, even one reported failed: a
// late IOERR makes the epoch g's all the same (core keeps an epoch marked
// with its own token), and the retry that finds it writes nothing, so no
// later commit of g's would credit it. Crediting it instead to the next
// guest that read it (a successor booted read-only) turned g's legal
// commits into zombie commits. It returns the epoch's owner.
func (t *tree) noteEpoch(g *guest) int {
	epoch, ok := t.committedEpoch()
	if !ok {
		return 0
	}
	if _, ok := t.owners[epoch]; !ok {
		t.checkEpochTaker(g, epoch)
		t.owners[epoch] = g.boot
		// Its session listing follows an epoch taken in a boot, or in a
		// reopen, which only a guest that took one before makes: a guest
		// booted read-only takes its first with its first accepted write.
		g.tookEpoch = t.booting || g.epochs > 0
		if !t.booting && g.epochs > 0 {
			t.checkReopenServed(g)
			g.reopenDue = false // reopened
		}
		g.epochs++
	}
	return t.owners[epoch]
}

// committed hears of every commit of the guest that changed rows. One of a
// zombie after a newer guest took its epoch is a commit past the fence: it
// goes in the ledger, for the checker to report, with the events it wrote.
// (Emits alone would miss a commit that writes no event, such as a claim
// released, or one whose emit never comes.)
func (g *guest) committed(changes int64) {
	t := g.t
	if !g.zombie {
		t.checkCommit(g)
	}
	owner := t.noteEpoch(g)
	if !g.zombie || owner <= g.boot {
		return
	}
	g.pastFence(owner, fmt.Sprintf("a transaction of %d row changes", changes))
}

// pastFence records a commit of zombie g's after boot owner took the
// tree's epoch, with the events it wrote, for the checker to report.
func (g *guest) pastFence(owner int, what string) {
	if rows, err := g.conn.Query(`SELECT type, seq, session_id FROM events WHERE gseq > ? ORDER BY gseq`, []any{g.from}); err == nil {
		for _, r := range rows.Values {
			what += fmt.Sprintf(", %v #%v of %v", r[0], r[1], r[2])
		}
	}
	g.t.ledger.ZombieCommits = append(g.t.ledger.ZombieCommits, check.ZombieCommit{At: g.t.now, Boot: g.boot, Latest: owner, What: what})
}

// maxGseq is the highest events.gseq c sees (0 if none, or unreadable).
func (t *tree) maxGseq(c *conn) int64 {
	rows, err := c.Query(`SELECT COALESCE(MAX(gseq), 0) FROM events`, nil)
	if err != nil || len(rows.Values) != 1 {
		return 0
	}
	n, _ := rows.Values[0][0].(int64)
	return n
}

// Respond implements runtime.Services. A zombie serves no client.
func (g *guest) Respond(id uint64, part runtime.ResponsePart) {
	if g.zombie || g.dead {
		return
	}
	g.t.respond(id, part)
}

// Random implements runtime.Services: seeded per guest.
func (g *guest) Random(p []byte) {
	for i := range p {
		p[i] = byte(g.rng.Uint32())
	}
}

// interpose is the nemesis at every host call of this guest.
func (g *guest) interpose(s runtime.Site) error {
	t := g.t
	if s.Phase == runtime.PhaseSweep && g.phase != runtime.PhaseSweep {
		g.sweepFaults = t.diskFaults()
	}
	g.phase = s.Phase
	if g.zombie {
		return nil
	}
	k := SiteKey{Import: s.Import, Phase: s.Phase, After: s.After}
	c := t.hist[k]
	c.Seen++
	t.noteSeen(s)
	if t.maybeSupersede(g, s) || t.maybeRaceReopen(g, s) {
		t.hist[k] = c
		return nil
	}
	if g.plan == nil && t.mayKill(nil) {
		g.plan = newPlan(t.rng, t.seen, false)
	}
	if g.plan != nil && t.mayKill(g.plan) && g.plan.at(s) {
		t.spentOnReply(g.plan)
		g.plan = nil
		t.kills++
		if t.stopInstead(g) {
			// Spends the kill budget, but is no kill: the histogram
			// counts the site as passed only.
			t.hist[k] = c
			t.tracef("%s to be stopped gracefully after its input, planned %s", g.name(), traceSite(s))
			return nil
		}
		c.Kills++
		t.countReplyKill(s)
		t.hist[k] = c
		t.tracef("%s killed %s", g.name(), traceSite(s))
		return errKill
	}
	t.hist[k] = c
	t.maybeBootFault(g, s)
	t.maybeListingLock(g, s)
	return nil
}

func (t *tree) noteSeen(s runtime.Site) {
	imps := t.seen[s.Phase]
	i := sort.SearchStrings(imps, s.Import)
	if i < len(imps) && imps[i] == s.Import {
		return
	}
	imps = append(imps, "")
	copy(imps[i+1:], imps[i:])
	imps[i] = s.Import
	t.seen[s.Phase] = imps
}

// removeFiles deletes the tree's database and its WAL companions, and the
// copy of a deleted tree taken before its delete.
func (t *tree) removeFiles() {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(t.path + suffix)
	}
	if t.del != nil {
		_ = os.Remove(t.del.before)
	}
}
