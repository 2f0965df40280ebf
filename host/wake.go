package host

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/retry"
)

// waker is a tree's one wake-up (core.Waker): a row in index.wakeups, which
// survives the process, and an in-memory timer that delivers it. It outlives
// the tree's instances: an evicted tree's timer still fires and boots it.
//
// A delivered wake-up is used up (DESIGN §4), but its row is deleted only
// after the delivery (a boot, or recovery.Wake) has run to its end: the
// handler's last act re-arms while work remains, and a crash anywhere before
// that must leave the row for the next Open. So while a delivery runs, the
// row is marked used up in memory: the first Arm replaces it instead of
// keeping the earlier time, and the row is deleted at the end only if
// nothing armed it meanwhile.
type waker struct {
	h  *Host
	id string

	mu         sync.Mutex // held across the index write of an arm, never while calling core
	row        int64      // at stored in index.wakeups; 0: no row
	timerAt    int64      // when the timer fires; 0: no timer
	stop       func() bool
	gen        uint64 // identifies the current timer; a stale one does nothing
	delivering bool   // a delivery runs; the row's time is used up
	rearmed    bool   // Arm was called during the current delivery
	armErr     error  // an Arm during the current delivery could not store its row
	armWanted  int64  // the earliest time such an Arm asked for (its timer is set at the delivery's end)
	again      bool   // the timer fired during the current delivery
	failures   int    // consecutive failed deliveries
	retired    bool   // the tree was deleted
}

var _ core.Waker = (*waker)(nil)

// wakerFor returns the tree's waker, creating it.
func (h *Host) wakerFor(id string) *waker {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.wakers[id]
	if w == nil {
		w = &waker{h: h, id: id}
		h.wakers[id] = w
	}
	return w
}

// Arm implements core.Waker: durably store min(existing, at), or at itself
// when the existing row was just delivered, then (re)schedule the timer.
func (w *waker) Arm(ctx context.Context, at int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.retired {
		return fmt.Errorf("arm wake-up of tree %s: %w", w.id, api.ErrTreeNotFound)
	}
	row := w.row
	switch {
	case w.delivering && !w.rearmed, row == 0, at < row:
		row = at
	}
	if row != w.row {
		if err := w.h.index.setWakeup(ctx, w.id, row); err != nil {
			err = fmt.Errorf("arm wake-up of tree %s: %w", w.id, err)
			// The caller must not count on it (its claim must not commit),
			// but this process still fires it (armTimerLocked): a handler
			// that re-arms as its last act and cannot store the row still
			// wants its retry.
			// A delivery in which it happened counts as failed, so its
			// used-up row is kept, not deleted (DESIGN §4 rule 2), and the
			// retry comes on the wake schedule (deliverLoop): a timer set
			// here at the handler's time would bring a tree whose storage
			// is full back every wake interval, as the schedule cannot
			// move a timer later.
			if w.delivering {
				w.armErr = err
				if w.armWanted == 0 || at < w.armWanted {
					w.armWanted = at
				}
				return err
			}
			w.armTimerLocked(at)
			return err
		}
		w.row = row
	}
	if w.delivering {
		w.rearmed = true
	}
	w.armTimerLocked(at)
	return nil
}

// armTimerLocked sets the timer for an Arm. Outside a delivery, after one
// that failed, the timer is the failed delivery's retry, on the wake
// schedule, and an Arm leaves it there: every claiming write arms a wake
// interval ahead before each attempt, and a guest's sweep that waited for
// storage past the wake call re-arms after the host settled the delivery,
// so on a full disk a tree that clients keep writing to would otherwise be
// woken every wake interval, not 1 s, 2 s, 4 s … a minute apart. Such an
// Arm is refused when it must write (no row), or needs no write, covered
// by the failed delivery's used-up row that is kept; either way the retry
// comes within a minute, sweeps and re-arms from what is stored, and a
// restart delivers the kept row at once. The first delivery that succeeds
// ends the run, and Arms set the timer at their own time again.
func (w *waker) armTimerLocked(at int64) {
	if !w.delivering && w.failures > 0 && w.timerAt != 0 {
		return
	}
	w.scheduleLocked(at)
}

// scheduleLocked makes the timer fire no later than at.
func (w *waker) scheduleLocked(at int64) {
	if w.h.closed.Load() || w.retired || (w.timerAt != 0 && w.timerAt <= at) {
		return
	}
	if w.stop != nil {
		w.stop()
	}
	w.gen++
	gen := w.gen
	w.timerAt = at
	d := time.Duration(max(at-w.h.cfg.Clock.Now(), 0)) * time.Millisecond
	w.stop = w.h.cfg.Clock.AfterFunc(d, func() { w.fire(gen) })
}

func (w *waker) stopTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
	w.stop, w.timerAt = nil, 0
	w.gen++
}

// retire forgets the wake-up of a deleted tree; its row is deleted with the
// tree's.
func (w *waker) retire() {
	w.stopTimer()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.retired, w.row = true, 0
}

func (w *waker) armed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.row != 0
}

// fire is the timer's callback.
func (w *waker) fire(gen uint64) {
	w.mu.Lock()
	if gen != w.gen || w.retired || w.h.closed.Load() {
		w.mu.Unlock()
		return
	}
	w.stop, w.timerAt = nil, 0
	if w.delivering {
		w.again = true
		w.mu.Unlock()
		return
	}
	w.delivering, w.rearmed = true, false
	w.mu.Unlock()
	if !w.h.goBackground(w.deliverLoop) {
		w.mu.Lock()
		w.delivering = false
		w.mu.Unlock()
	}
}

// deliverLoop delivers the wake-up (the caller has set delivering), then
// settles the row: deleted if the delivery succeeded and nothing re-armed,
// kept with a retry timer if it failed. A timer that fired meanwhile is
// delivered next.
func (w *waker) deliverLoop() {
	h := w.h
	for {
		err := h.deliverRecovered(w.id)
		w.mu.Lock()
		if err == nil && w.armErr != nil && !w.rearmed {
			// The handler's re-arm was refused: as a failed delivery.
			err = w.armErr
		}
		if err == nil && w.armWanted != 0 {
			// Another Arm of this delivery stored a row, so it is not a
			// failed one: the refused Arm's time is still kept in memory.
			w.scheduleLocked(w.armWanted)
		}
		w.armErr, w.armWanted = nil, 0
		switch {
		case w.retired || errors.Is(err, api.ErrTreeNotFound):
			// The tree is gone: so is any reason to wake it.
			if w.row != 0 && !w.retired {
				if derr := h.index.deleteWakeup(h.bgCtx, w.id); derr == nil {
					w.row = 0
				}
			}
		case err != nil:
			w.failures++
			delay := retry.Wake().Delay(w.failures - 1)
			if !h.closed.Load() {
				h.log.Warn("wake-up delivery failed; retrying", "tree", w.id, "in", delay, "err", err)
			}
			w.scheduleLocked(h.cfg.Clock.Now() + delay.Milliseconds())
		default:
			w.failures = 0
			if !w.rearmed && w.row != 0 {
				if derr := h.index.deleteWakeup(h.bgCtx, w.id); derr != nil {
					// A row left behind is a spurious wake-up later: harmless.
					h.log.Warn("delete delivered wake-up", "tree", w.id, "err", derr)
				} else {
					w.row = 0
				}
			}
		}
		again := w.again && !w.retired && !h.closed.Load()
		w.again, w.rearmed, w.delivering = false, false, again
		w.mu.Unlock()
		if h.cfg.hooks.delivered != nil {
			h.cfg.hooks.delivered(w.id, err)
		}
		if !again {
			return
		}
	}
}

// deliverRecovered is deliver, with a panic (SQLite's connection panics
// when its memory cannot be mapped, in the boot a delivery runs or in the
// running instance's sweep) turned into the delivery's error, logged with
// its stack: a wake-up runs under no HTTP handler to recover it, so the
// panic would end the process, and every other tree with it. A boot's
// entry is failed by then (failBootOnPanic), a running tree's hold ended
// (wakeHeld), so the delivery is retried as a failed one is.
func (h *Host) deliverRecovered(id string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("wake-up delivery panicked", "tree", id, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("wake tree %s: panicked: %v", id, p)
		}
	}()
	return h.deliver(h.bgCtx, id)
}

// deliver runs the wake handler for the tree: the wake-up of its running
// instance (recovery.Wake in process), or a boot (which sweeps and re-arms)
// when it has none. The running instance counts as in use while it is
// woken, so no eviction closes it under the sweep; a delivery does not
// count as a use of the tree otherwise (lastUsed stays).
func (h *Host) deliver(ctx context.Context, id string) error {
	for {
		e, booted, err := h.activate(ctx, id, false)
		if err != nil {
			return err
		}
		if booted {
			return nil
		}
		if f := h.cfg.hooks.found; f != nil {
			f(id)
		}
		if !h.hold(e) {
			continue // evicted or deleted since: look again
		}
		wake := e.run.wake
		if f := h.cfg.hooks.waking; f != nil {
			// The hook is part of the wake, so a test blocked in it sees
			// the tree held exactly as the sweep does.
			wake = func(ctx context.Context) error { f(id); return e.run.wake(ctx) }
		}
		err = h.wakeHeld(ctx, e, wake)
		if err != nil {
			return fmt.Errorf("wake tree %s: %w", id, err)
		}
		return nil
	}
}

// wakeHeld runs wake on e, which hold counted in use, and ends that use
// however wake ends: a panic too, which deliverRecovered turns into the
// delivery's error. Left counted, the tree would be in use for good, and
// no eviction, idle or for the cap, would close it again.
func (h *Host) wakeHeld(ctx context.Context, e *entry, wake func(context.Context) error) error {
	defer func() {
		h.mu.Lock()
		e.inflight--
		h.mu.Unlock()
	}()
	return wake(ctx)
}
