package host

import (
	"context"
	"time"
)

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

// EvictIdle closes every instance that has no running execution and has not
// been used (Create, Get) for IdleTimeout by the host clock, and
// reports how many it closed. The close is graceful (core.Instance.Close).
// Wake-up rows stay: a tree with a claim boots again when its wake-up fires.
// The eviction loop calls it; tests call it by hand.
func (h *Host) EvictIdle(ctx context.Context) int {
	timeout := h.cfg.IdleTimeout.Milliseconds()
	now := h.cfg.Clock.Now()
	type candidate struct {
		e        *entry
		lastUsed int64
	}
	var cands []candidate
	h.mu.Lock()
	for _, e := range h.trees {
		if e.busy == nil && e.run != nil && now-e.lastUsed >= timeout {
			cands = append(cands, candidate{e, e.lastUsed})
		}
	}
	h.mu.Unlock()

	n := 0
	for _, c := range cands {
		if !c.e.run.idle() {
			continue
		}
		h.mu.Lock()
		if h.closed.Load() || h.trees[c.e.id] != c.e || c.e.busy != nil || c.e.lastUsed != c.lastUsed || c.e.inflight != 0 {
			h.mu.Unlock()
			continue // closing, or used or taken over since
		}
		c.e.busy = make(chan struct{})
		h.mu.Unlock()
		// An execution that started since the check is stopped by Close
		// with shutdown, keeping its claim and so its wake-up row.
		if err := closeEntry(ctx, c.e); err != nil {
			h.log.Warn("evict idle tree", "tree", c.e.id, "err", err)
		}
		h.mu.Lock()
		delete(h.trees, c.e.id)
		close(c.e.busy)
		c.e.busy = nil
		h.mu.Unlock()
		h.evictions.Add(1)
		h.log.Debug("evicted idle tree", "tree", c.e.id)
		n++
	}
	return n
}
