package fakehost

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Waker records the tree's wake-up. Like a Durable Object alarm there is at
// most one; Fire delivers it (using it up) to whatever handler the test runs.
type Waker struct {
	mu    sync.Mutex
	at    int64 // 0: none armed
	arms  int
	onArm func(at int64)
}

// Arm implements core.Waker: the wake-up fires no later than at.
func (w *Waker) Arm(_ context.Context, at int64) error {
	w.mu.Lock()
	if w.at == 0 || at < w.at {
		w.at = at
	}
	w.arms++
	hook := w.onArm
	w.mu.Unlock()
	if hook != nil {
		hook(at)
	}
	return nil
}

// OnArm sets a function called after every Arm (outside the waker's lock):
// a test uses it to fire a wake between the arm and a claim's commit.
func (w *Waker) OnArm(f func(at int64)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onArm = f
}

// At is the armed time, or 0 when no wake-up is armed.
func (w *Waker) At() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// Take uses up the wake-up, as its delivery does, and reports whether one
// was armed.
func (w *Waker) Take() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	armed := w.at != 0
	w.at = 0
	return armed
}

// IDs mints ids "<prefix>-1", "<prefix>-2", … in order.
type IDs struct {
	Prefix string
	n      atomic.Int64
}

// NewID implements core.IDSource.
func (g *IDs) NewID() string { return fmt.Sprintf("%s-%d", g.Prefix, g.n.Add(1)) }
