package fakehost

import (
	"sort"
	"sync"
	"time"
)

// Clock is a virtual clock. Time moves only when Advance or Set is called;
// timers due by then fire, in time order, each in its own goroutine (as
// time.AfterFunc does).
type Clock struct {
	mu      sync.Mutex
	now     int64
	timers  []*timer
	seq     int
	changed chan struct{} // closed and replaced whenever a timer is added
}

type timer struct {
	at   int64
	seq  int
	f    func()
	dead bool
}

// NewClock returns a clock reading start (ms since the Unix epoch).
func NewClock(start int64) *Clock { return &Clock{now: start, changed: make(chan struct{})} }

// Now implements core.Clock.
func (c *Clock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements core.Clock.
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{at: c.now + d.Milliseconds(), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.dead {
			return false
		}
		t.dead = true
		return true
	}
}

// Advance moves the clock forward by d and fires the timers now due.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now() + d.Milliseconds()) }

// Set moves the clock to at (never backwards) and fires the timers now due.
func (c *Clock) Set(at int64) {
	c.mu.Lock()
	if at > c.now {
		c.now = at
	}
	var due, keep []*timer
	for _, t := range c.timers {
		switch {
		case t.dead:
		case t.at <= c.now:
			t.dead = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool {
		if due[i].at != due[j].at {
			return due[i].at < due[j].at
		}
		return due[i].seq < due[j].seq
	})
	for _, t := range due {
		go t.f()
	}
}

// BlockUntil waits until at least n timers are pending, so a test can
// advance time only once the code under test has set its timer.
func (c *Clock) BlockUntil(n int) {
	for {
		c.mu.Lock()
		pending, changed := c.pendingLocked(), c.changed
		c.mu.Unlock()
		if pending >= n {
			return
		}
		<-changed
	}
}

// Pending is the number of timers not yet fired or stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pendingLocked()
}

func (c *Clock) pendingLocked() int {
	n := 0
	for _, t := range c.timers {
		if !t.dead {
			n++
		}
	}
	return n
}
