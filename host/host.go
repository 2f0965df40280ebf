package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/sqlitedb"
)

// ErrClosed is returned once the host is closing or closed. It wraps
// core.ErrClosed, which the API answers with 503.
var ErrClosed = fmt.Errorf("host: %w", core.ErrClosed)

// Host runs many trees in this process: one SQLite file and at most one
// core.Instance per tree, a durable wake-up per tree, idle eviction.
type Host struct {
	cfg      Config
	log      *slog.Logger
	treesDir string
	index    *index
	backend  backend // in-process, or guest when Config.Guest is set

	// bgCtx bounds background work (wake-up deliveries, eviction); Close
	// cancels it.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup // background goroutines; Add only under mu while open

	closed atomic.Bool // set under mu; read anywhere (also by wakers)
	// closeDone is closed when the first Close has finished: a Close
	// called meanwhile waits for it, so that its return means what the
	// first one's does (every instance and database closed).
	closeDone chan struct{}

	mu    sync.Mutex // guards the fields below; never held while calling core or doing I/O
	trees map[string]*entry
	uses  uint64 // counts uses of trees: the order of entry.lastUse
	// unopened counts the entries of trees a Delete found not open: they
	// hold no instance and do not count toward MaxOpenTrees (full).
	unopened  int
	wakers    map[string]*waker
	evictStop func() bool
	// refusalLoggedAt is when (host clock) a cap refusal was last logged
	// at Info, if refusalLogged: one line per CapRefusalLogEvery.
	refusalLoggedAt int64
	refusalLogged   bool

	recovered    chan struct{} // closed when Open's boots have all run
	bootedAtOpen int

	boots, bootFailures, evictions atomic.Int64
	capEvictions, capRefusals      atomic.Int64
}

// entry is a tree known to be active here. While busy is non-nil an
// operation owns it (booting, evicting, deleting); others wait for busy to
// close and look again.
type entry struct {
	id       string
	busy     chan struct{}
	failed   error          // set when the boot that held busy failed: its waiters share the error
	run      instance       // the running instance, whichever backend
	inst     *core.Instance // run's core.Instance with the in-process backend; nil with guests
	db       *sqlitedb.DB
	info     api.TreeInfo
	lastUsed int64
	// lastUse orders uses as lastUsed cannot (two in one millisecond): the
	// host's use count at this tree's latest (used); the cap closes the
	// lowest first.
	lastUse uint64
	// inflight counts the requests using the tree: a guest's (GuestHandler,
	// acquire), the contexts of in-process Gets still live (Get), and a
	// wake-up being delivered to the running instance (deliver). Eviction
	// closes only a tree with none.
	inflight int
}

var _ api.Trees = (*Host)(nil)

// Open opens the data directory and starts serving at once: it reads the
// wake-up index and boots, in the background and at most BootConcurrency at
// a time, exactly the trees that have a wake-up row (those with claims or
// pending work). No other tree file is opened until it is asked for. A tree
// whose boot fails is logged and keeps its row, so its wake-up retries.
// Recovered reports when these boots have run.
func Open(ctx context.Context, cfg Config) (*Host, error) {
	h, err := open(ctx, cfg)
	if err != nil && cfg.Guest != nil {
		err = errors.Join(err, cfg.Guest.Close(ctx))
	}
	return h, err
}

func open(ctx context.Context, cfg Config) (*Host, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open host: %w", err)
	}
	treesDir := filepath.Join(cfg.DataDir, "trees")
	if err := os.MkdirAll(treesDir, 0o700); err != nil {
		return nil, fmt.Errorf("open host: %w", err)
	}
	ix, err := openIndex(ctx, filepath.Join(cfg.DataDir, "index.db"), cfg.hooks.vfs)
	if err != nil {
		return nil, fmt.Errorf("open host: %w", err)
	}
	rows, err := ix.wakeups(ctx)
	if err != nil {
		ix.close()
		return nil, fmt.Errorf("open host: read wake-ups: %w", err)
	}
	h := &Host{
		cfg: cfg, log: cfg.Log, treesDir: treesDir, index: ix,
		trees: map[string]*entry{}, wakers: map[string]*waker{},
		recovered: make(chan struct{}), closeDone: make(chan struct{}),
	}
	h.backend = native{h}
	if cfg.Guest != nil {
		h.backend = guestBackend{cfg.Guest}
	}
	h.bgCtx, h.bgCancel = context.WithCancel(context.Background())

	// A tree whose creation died before its root session existed was never
	// visible to anyone: remove it. Its client may have seen the create
	// fail or hang, so the line lets an operator match that to this.
	unready, err := ix.unready(ctx)
	if err != nil {
		ix.close()
		return nil, fmt.Errorf("open host: read unfinished trees: %w", err)
	}
	for _, t := range unready {
		if err := errors.Join(h.removeFiles(t.id), h.dropRow(ctx, t.id)); err != nil {
			h.log.Warn("remove unfinished tree", "tree", t.id, "principal", t.principal, "err", err)
			continue
		}
		h.log.Info("removed a tree whose create never finished", "tree", t.id, "principal", t.principal)
	}
	h.removeDeletedFiles(ctx)

	// Every row is delivered now: booting re-arms from durable state (DESIGN
	// §4 rule 3), and the row is used up only once that has happened.
	var due []*waker
	for _, r := range rows {
		if !ValidTreeID(r.treeID) {
			h.log.Error("index: wake-up row with an invalid tree id; ignored", "tree", r.treeID)
			continue
		}
		w := &waker{h: h, id: r.treeID, row: r.at, delivering: true}
		h.wakers[r.treeID] = w
		due = append(due, w)
	}
	h.bootedAtOpen = len(due)
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		defer close(h.recovered)
		sem := make(chan struct{}, BootConcurrency)
		var wg sync.WaitGroup
		for _, w := range due {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				w.deliverLoop()
			})
		}
		wg.Wait()
	}()
	h.scheduleEviction()
	h.log.Info("host open", "data", cfg.DataDir, "booting", len(due))
	return h, nil
}

// Recovered is closed once every tree that had a wake-up row at Open has
// been booted (or has failed to boot and been scheduled for a retry).
func (h *Host) Recovered() <-chan struct{} { return h.recovered }

// Stats is a snapshot of the host's counters.
type Stats struct {
	Instances    int   // trees with an open instance now, not being booted, closed or deleted
	Wakeups      int   // trees with a wake-up row, as this host knows them
	BootedAtOpen int   // trees Open booted: those with a wake-up row
	Boots        int64 // instances booted since Open, by any path
	BootFailures int64 // boots that failed since Open
	Evictions    int64 // idle instances closed since Open
	CapEvictions int64 // instances closed since Open to make room under MaxOpenTrees
	CapRefusals  int64 // opens refused since Open with ErrTooManyOpen
}

// Stats returns the host's counters.
func (h *Host) Stats() Stats {
	h.mu.Lock()
	s := Stats{BootedAtOpen: h.bootedAtOpen}
	for _, e := range h.trees {
		// A busy entry's run belongs to the operation that owns it (a boot
		// sets it without h.mu): not read here.
		if e.busy == nil && e.run != nil {
			s.Instances++
		}
	}
	wakers := make([]*waker, 0, len(h.wakers))
	for _, w := range h.wakers {
		wakers = append(wakers, w)
	}
	h.mu.Unlock()
	for _, w := range wakers {
		if w.armed() {
			s.Wakeups++
		}
	}
	s.Boots, s.BootFailures, s.Evictions = h.boots.Load(), h.bootFailures.Load(), h.evictions.Load()
	s.CapEvictions, s.CapRefusals = h.capEvictions.Load(), h.capRefusals.Load()
	return s
}

// Close stops the host gracefully: timers and background work stop, every
// instance is closed with core.Instance.Close (which records shutdown and
// keeps claims, so the next Open resumes them as after a crash), and every
// database is closed. ctx bounds the wait for executions to stop. Wake-up
// rows stay: they are what the next Open boots. A Close while another
// runs waits for it to finish (or ctx) and returns nil: the first one
// reports the errors.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed.Load() {
		h.mu.Unlock()
		select {
		case <-h.closeDone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("close host: waiting for another Close: %w", ctx.Err())
		}
	}
	h.closed.Store(true)
	defer close(h.closeDone)
	if h.evictStop != nil {
		h.evictStop()
	}
	wakers := make([]*waker, 0, len(h.wakers))
	for _, w := range h.wakers {
		wakers = append(wakers, w)
	}
	h.mu.Unlock()

	for _, w := range wakers {
		w.stopTimer()
	}
	h.bgCancel()
	var errs []error
	if err := waitGroup(ctx, &h.bg); err != nil {
		errs = append(errs, fmt.Errorf("close host: background work: %w", err))
	}
	if err := h.waitNotBusy(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close host: %w", err))
	}

	h.mu.Lock()
	var open []*entry
	for _, e := range h.trees {
		if e.run != nil && e.busy == nil {
			open = append(open, e)
		}
	}
	h.mu.Unlock()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, e := range open {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := h.closeEntry(ctx, e); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := h.backend.close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("close host: %w", err))
	}
	if err := h.index.close(); err != nil {
		errs = append(errs, fmt.Errorf("close host: index: %w", err))
	}
	return errors.Join(errs...)
}

// waitNotBusy waits until no entry is being booted, evicted or deleted.
// Nothing new starts once the host is closed.
func (h *Host) waitNotBusy(ctx context.Context) error {
	for {
		h.mu.Lock()
		var busy chan struct{}
		for _, e := range h.trees {
			if e.busy != nil {
				busy = e.busy
				break
			}
		}
		h.mu.Unlock()
		if busy == nil {
			return nil
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return fmt.Errorf("wait for tree operations: %w", ctx.Err())
		}
	}
}

func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// goBackground runs f as background work unless the host is closed.
func (h *Host) goBackground(f func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed.Load() {
		return false
	}
	h.bg.Go(f)
	return true
}

func (h *Host) treePath(id string) string { return filepath.Join(h.treesDir, id+".db") }

// activate returns the tree's running entry, booting it if needed; at most
// one boot per tree runs at a time and concurrent callers share it. touch
// marks the tree used. booted reports that this call booted the tree and
// its boot sweep and re-arm succeeded. A boot that would pass
// MaxOpenTrees first closes another tree (makeRoom), or fails with
// ErrTooManyOpen.
func (h *Host) activate(ctx context.Context, id string, touch bool) (e *entry, booted bool, err error) {
	for {
		h.mu.Lock()
		if h.closed.Load() {
			h.mu.Unlock()
			return nil, false, ErrClosed
		}
		e = h.trees[id]
		if e == nil && h.full() {
			h.mu.Unlock()
			if err := h.makeRoom(); err != nil {
				return nil, false, err
			}
			continue
		}
		if e == nil {
			e = &entry{id: id, busy: make(chan struct{})}
			h.trees[id] = e
			h.mu.Unlock()
			// The boot is shared: one caller's cancellation must not fail it
			// for the others (it is bounded by the database's busy timeout).
			defer h.failBootOnPanic(e, true)
			sweepErr, err := h.boot(context.WithoutCancel(ctx), e, nil)
			h.finishBoot(e, err, true, touch)
			if err != nil {
				return nil, false, err
			}
			return e, sweepErr == nil, nil
		}
		if busy := e.busy; busy != nil {
			h.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
			if e.failed != nil {
				return nil, false, e.failed
			}
			continue
		}
		if touch {
			h.used(e)
		}
		h.mu.Unlock()
		return e, false, nil
	}
}

// full reports whether opening one more tree would pass MaxOpenTrees.
// The caller holds h.mu.
func (h *Host) full() bool { return len(h.trees)-h.unopened >= h.cfg.MaxOpenTrees }

// used marks e used now. The caller holds h.mu.
func (h *Host) used(e *entry) {
	h.uses++
	e.lastUsed, e.lastUse = h.cfg.Clock.Now(), h.uses
}

// hold counts e in use (eviction, idle or for the cap, leaves it open)
// if it is still its tree's entry and no operation (a close, a delete)
// owns it, and reports whether it did; the caller looks again if not, and
// ends the use with release (or inflight-- for a wake-up, which is no use
// of the tree).
func (h *Host) hold(e *entry) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.trees[e.id] != e || e.busy != nil {
		return false
	}
	e.inflight++
	return true
}

// release ends a request's use of e (Get's context, acquire): the tree
// counts as used now, and eviction may close it once no other uses it.
func (h *Host) release(e *entry) {
	h.mu.Lock()
	e.inflight--
	h.used(e)
	h.mu.Unlock()
	if f := h.cfg.hooks.released; f != nil {
		f(e.id)
	}
}

// finishBoot publishes the outcome of the boot that holds e.busy. With
// share, callers waiting on it get the same error; otherwise they look
// again (and boot for themselves). touch marks the tree used: not for a
// wake-up's boot, so a tree only its timer opened is the first an idle
// eviction or the cap closes.
func (h *Host) finishBoot(e *entry, err error, share, touch bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if share {
			e.failed = err
		}
		delete(h.trees, e.id)
	} else if touch {
		h.used(e)
	}
	close(e.busy)
	e.busy = nil
}

// failBootOnPanic, deferred by the code that boots e, fails the boot when
// that code panics (SQLite's connection panics when its memory cannot be
// mapped, past the process's address-space limit), then panics on. Left
// busy, the entry would hold for good every request for its tree, a place
// under MaxOpenTrees and Close.
func (h *Host) failBootOnPanic(e *entry, share bool) {
	if p := recover(); p != nil {
		h.finishBoot(e, fmt.Errorf("boot tree %s: panicked: %v", e.id, p), share, false)
		panic(p)
	}
}

// boot opens the tree's file and boots an instance on it (migrations, a new
// epoch, the sweep, the re-arm). info is the index row when the caller has
// it; otherwise it is read, and a tree without one is api.ErrTreeNotFound,
// before any file is touched. An instance whose sweep failed still serves;
// the failure is returned as sweepErr for a wake-up delivery to retry.
func (h *Host) boot(ctx context.Context, e *entry, info *api.TreeInfo) (sweepErr, err error) {
	// A boot that panics failed as much as one that returned its error:
	// counted the same (Stats.BootFailures), then panicked on.
	defer func() {
		if p := recover(); p != nil {
			h.bootFailures.Add(1)
			panic(p)
		}
	}()
	if info == nil {
		i, found, err := h.index.tree(ctx, e.id)
		if err != nil {
			return nil, fmt.Errorf("boot tree %s: read index: %w", e.id, err)
		}
		if !found {
			return nil, fmt.Errorf("boot tree %s: %w", e.id, api.ErrTreeNotFound)
		}
		info = &i
	}
	if h.cfg.hooks.boot != nil {
		h.cfg.hooks.boot(e.id)
	}
	log := h.log.With("tree", e.id)
	db, err := sqlitedb.Open(h.treePath(e.id), sqlitedb.Options{VFS: h.cfg.hooks.vfs})
	if err != nil {
		h.bootFailures.Add(1)
		return nil, fmt.Errorf("boot tree %s: %w", e.id, err)
	}
	start := time.Now()
	// A panic while the tree starts (SQLite's connection cannot map its
	// memory in a migration's query, say) closes the database before it
	// panics on to failBootOnPanic: the failed entry is dropped, and with
	// it the only reference to db, whose file handles and memory would
	// otherwise leak with every request that boots the tree again.
	defer func() {
		if p := recover(); p != nil {
			db.Close()
			panic(p)
		}
	}()
	run, err, startErr := h.backend.start(ctx, e.id, db, h.wakerFor(e.id), log)
	if startErr != nil {
		db.Close()
		h.bootFailures.Add(1)
		return nil, fmt.Errorf("boot tree %s: %w", e.id, startErr)
	}
	h.boots.Add(1)
	e.run, e.db, e.info = run, db, *info
	if n, ok := run.(nativeInstance); ok {
		e.inst = n.inst
	}
	if err != nil {
		log.Warn("boot sweep failed; the wake-up retries it", "err", err)
	}
	log.Debug("tree started", "took", time.Since(start))
	return err, nil
}

// closeEntry closes a tree's instance gracefully, then its database. ctx
// bounds the wait for executions to stop; the database is closed anyway,
// which stops any straggler's writes. The caller owns e (e.busy is set,
// so hold refuses it), or e was never published, or the host is closing.
func (h *Host) closeEntry(ctx context.Context, e *entry) error {
	if f := h.cfg.hooks.closing; f != nil {
		f(e.id)
	}
	err := e.run.close(ctx)
	if cerr := e.db.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("close tree %s: %w", e.id, err)
	}
	return nil
}
