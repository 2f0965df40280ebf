package host

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/revenantrt/revenant/core/api"
)

// ErrTooManyOpen is returned when opening a tree (Create, Get, a guest's
// request, a wake-up's boot) would pass Config.MaxOpenTrees and no open
// tree may be closed now: every one runs an execution, serves a request
// or an event stream, or is being booted, closed or deleted. The API
// answers it 503 unavailable with Retry-After (CapRetryAfter); a wake-up
// delivery refused by it keeps its row and retries with backoff.
var ErrTooManyOpen error = &api.Error{
	Type:       api.ErrUnavailable,
	Message:    "the server has as many sessions open as it may, and every one is in use; try again shortly",
	RetryAfter: CapRetryAfter,
}

// scheduleEviction arms the eviction loop's next step, every half idle
// timeout, on the host clock, unless ManualEviction switched it off.
func (h *Host) scheduleEviction() {
	if h.cfg.ManualEviction {
		return
	}
	every := max(h.cfg.IdleTimeout/2, time.Millisecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed.Load() {
		return
	}
	h.evictStop = h.cfg.Clock.AfterFunc(every, func() {
		h.goBackground(func() {
			h.EvictIdle(h.bgCtx)
			h.scheduleEviction()
		})
	})
}

// candidate is an open tree eviction may close, as it was when chosen.
type candidate struct {
	e       *entry
	lastUse uint64
}

// closable reports whether eviction may consider e at all: open, owned
// by no operation, serving no request. The instance's own idle check
// (no execution runs) comes after, outside h.mu. The caller holds h.mu.
func closable(e *entry) bool { return e.busy == nil && e.run != nil && e.inflight == 0 }

// EvictIdle closes every instance that has no running execution, serves
// no request, and has not been used (Create, Get) for IdleTimeout by the
// host clock, and reports how many it closed. The close is graceful
// (core.Instance.Close). Wake-up rows stay: a tree with a claim boots
// again when its wake-up fires. The eviction loop calls it; tests call it
// by hand.
func (h *Host) EvictIdle(ctx context.Context) int {
	timeout := h.cfg.IdleTimeout.Milliseconds()
	now := h.cfg.Clock.Now()
	var cands []candidate
	h.mu.Lock()
	for _, e := range h.trees {
		if closable(e) && now-e.lastUsed >= timeout {
			cands = append(cands, candidate{e, e.lastUse})
		}
	}
	h.mu.Unlock()

	n := 0
	for _, c := range cands {
		if h.evict(ctx, c) {
			h.evictions.Add(1)
			h.log.Debug("evicted idle tree", "tree", c.e.id)
			n++
		}
	}
	return n
}

// evict closes c's tree if it is still as it was when chosen (not used,
// taken over or given a request since) and no execution runs in it, and
// reports whether it did. Its wake-up row and timer stay.
func (h *Host) evict(ctx context.Context, c candidate) bool {
	if !c.e.run.idle() {
		return false
	}
	h.mu.Lock()
	if h.closed.Load() || h.trees[c.e.id] != c.e || !closable(c.e) || c.e.lastUse != c.lastUse {
		h.mu.Unlock()
		return false // closing, or used or taken over since
	}
	c.e.busy = make(chan struct{})
	h.mu.Unlock()
	// An execution that started since the check is stopped by Close
	// with shutdown, keeping its claim and so its wake-up row.
	if err := h.closeEntry(ctx, c.e); err != nil {
		h.log.Warn("evict tree", "tree", c.e.id, "err", err)
	}
	h.mu.Lock()
	delete(h.trees, c.e.id)
	close(c.e.busy)
	c.e.busy = nil
	h.mu.Unlock()
	return true
}

// makeRoom is called, without h.mu, by an opener that found the host at
// its cap (Config.MaxOpenTrees): it closes the least recently used tree
// that eviction may close now, whatever its idle time, and returns nil
// once there is room, for the caller to look again (another opener may
// take the room first). With none to close it is ErrTooManyOpen: it never
// waits for a tree to become idle. The close is bounded as the eviction
// loop's is (the host's background context), not by the opener's.
func (h *Host) makeRoom() error {
	h.mu.Lock()
	if !h.full() {
		h.mu.Unlock()
		return nil
	}
	var cands []candidate
	for _, e := range h.trees {
		if closable(e) {
			cands = append(cands, candidate{e, e.lastUse})
		}
	}
	h.mu.Unlock()
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.lastUse, b.lastUse) })
	for _, c := range cands {
		if h.evict(h.bgCtx, c) {
			h.capEvictions.Add(1)
			h.log.Debug("closed the least recently used tree for the cap on open trees", "tree", c.e.id)
			return nil
		}
	}
	n := h.capRefusals.Add(1)
	h.mu.Lock()
	now := h.cfg.Clock.Now()
	level := slog.LevelDebug
	if !h.refusalLogged || now-h.refusalLoggedAt >= CapRefusalLogEvery.Milliseconds() {
		h.refusalLogged, h.refusalLoggedAt, level = true, now, slog.LevelInfo
	}
	h.mu.Unlock()
	h.log.Log(h.bgCtx, level, "open tree refused: at the cap of open trees, none idle", "max_open_trees", h.cfg.MaxOpenTrees, "refusals", n)
	return ErrTooManyOpen
}

// CapRefusalLogEvery spaces the Info lines of refusals at the cap: during
// a flood each request is refused, and only the first in each such span
// (by the host clock) is logged at Info, the others at Debug; each line
// carries the count of refusals so far.
const CapRefusalLogEvery = 10 * time.Second
