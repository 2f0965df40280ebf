package host

import (
	"context"
	"fmt"

	"github.com/revenantrt/revenant/core"
)

// WithHooks returns cfg with test hooks: boot is called with a tree id just
// before its file is opened, delivered when a wake-up delivery has settled.
func WithHooks(cfg Config, boot func(id string), delivered func(id string, err error)) Config {
	cfg.hooks = hooks{boot: boot, delivered: delivered}
	return cfg
}

// WithReleaseHook returns cfg whose host calls released with the tree id
// each time a request stops using the tree (a Get's context ended, a
// guest's request returned).
func WithReleaseHook(cfg Config, released func(id string)) Config {
	cfg.hooks.released = released
	return cfg
}

// WithClosingHook returns cfg whose host calls closing with the tree id as
// an eviction, a delete or Close starts to close the tree's instance.
func WithClosingHook(cfg Config, closing func(id string)) Config {
	cfg.hooks.closing = closing
	return cfg
}

// TryHold counts tree id in use as a request does (Get, a guest's
// request), if it is open and no operation owns it, and reports whether it
// did; release ends that use.
func (h *Host) TryHold(id string) (held bool, release func()) {
	h.mu.Lock()
	e := h.trees[id]
	h.mu.Unlock()
	if e == nil || !h.hold(e) {
		return false, func() {}
	}
	return true, func() { h.release(e) }
}

// OpenInstance is tree id's running instance, or nil when it is not open;
// unlike Get it neither boots the tree nor counts as a use.
func (h *Host) OpenInstance(id string) *core.Instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.trees[id]; e != nil && e.busy == nil {
		return e.inst
	}
	return nil
}

// WithWakingHook returns cfg whose host calls waking with the tree id
// when a wake-up delivery is about to sweep the tree's running instance.
func WithWakingHook(cfg Config, waking func(id string)) Config {
	cfg.hooks.waking = waking
	return cfg
}

// WithFoundHook returns cfg whose host calls found with the tree id when a
// Get (with a context that ends) or a wake-up delivery has found the
// tree's instance running, before it holds the tree.
func WithFoundHook(cfg Config, found func(id string)) Config {
	cfg.hooks.found = found
	return cfg
}

// EvictAfter chooses open tree id as EvictIdle chooses its candidates,
// runs between, then evicts that candidate as EvictIdle would, and reports
// whether the tree closed.
func (h *Host) EvictAfter(ctx context.Context, id string, between func()) bool {
	h.mu.Lock()
	e := h.trees[id]
	var c candidate
	if e != nil {
		c = candidate{e, e.lastUse}
	}
	h.mu.Unlock()
	if e == nil {
		return false
	}
	between()
	return h.evict(ctx, c)
}

// IndexVersion is the index schema version this build writes.
const IndexVersion = indexVersion

// WithDeleteFault returns cfg whose deletes fail their index write with
// what fail returns (nil: the write goes ahead).
func WithDeleteFault(cfg Config, fail func(id string) error) Config {
	cfg.hooks.deleteIndex = fail
	return cfg
}

// WithVFS returns cfg whose databases (the index and every tree's) are
// opened through the registered SQLite VFS vfs (internal/faultvfs).
func WithVFS(cfg Config, vfs string) Config {
	cfg.hooks.vfs = vfs
	return cfg
}

// Crash stops the host the way SIGKILL would: timers and background work
// stop, every tree database is closed without a shutdown record (so no
// execution writes again) and its instance abandoned, and the index is
// closed. Wake-up rows and claims stay exactly as they were.
func (h *Host) Crash() {
	h.mu.Lock()
	if h.closed.Load() {
		// Closed or crashed already: nothing is left to stop, and closeDone
		// is the first one's to close.
		h.mu.Unlock()
		<-h.closeDone
		return
	}
	h.closed.Store(true)
	defer close(h.closeDone) // a Close after the crash has nothing to wait for
	if h.evictStop != nil {
		h.evictStop()
	}
	var wakers []*waker
	for _, w := range h.wakers {
		wakers = append(wakers, w)
	}
	h.mu.Unlock()
	for _, w := range wakers {
		w.stopTimer()
	}
	h.bgCancel()
	h.bg.Wait()
	h.mu.Lock()
	var open []*entry
	for _, e := range h.trees {
		if e.run != nil {
			open = append(open, e)
		}
	}
	h.mu.Unlock()
	for _, e := range open {
		e.db.Close()
		abandon(e.run)
	}
	h.index.close()
}

// abandon drops an instance the way a crash would: no shutdown record (the
// database is closed first, so a guest's shutdown cannot write anything).
func abandon(run instance) {
	switch r := run.(type) {
	case nativeInstance:
		r.inst.Abandon()
	case *guestInstance:
		_ = r.tree.Close(context.Background())
	default:
		panic(fmt.Sprintf("abandon: unknown instance %T", run))
	}
}

// WakeTimerAt is when tree id's wake-up timer fires (its in-memory
// schedule, which may run ahead of a row storage refused), or 0 when none
// is set.
func (h *Host) WakeTimerAt(id string) int64 {
	w := h.wakerFor(id)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timerAt
}

// Busy lists the trees whose entry an operation holds now (a boot, a
// close): none once every request has been answered.
func (h *Host) Busy() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for id, e := range h.trees {
		if e.busy != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// WithCreateWaitsHook returns cfg whose host calls waits with the tree id
// as a Create starts to wait for another operation that holds the id.
func WithCreateWaitsHook(cfg Config, waits func(id string)) Config {
	cfg.hooks.createWaits = waits
	return cfg
}
