package hosttest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/conform"
)

// Advancer is a virtual clock: time moves only when Advance is called, and
// timers due by then fire.
type Advancer interface {
	Advance(d time.Duration)
}

// NewClock returns the clock under test, fresh for each test.
type NewClock func(t conform.T) core.Clock

// RunClock runs the clock suite on t.
func RunClock(t *testing.T, newClock NewClock) { RunClockT(conform.Wrap(t), newClock) }

// RunClockT is RunClock on any conform.T.
func RunClockT(t conform.T, newClock NewClock) {
	runCases(t, newClock, []testCase[core.Clock]{
		{"Now is milliseconds since the Unix epoch and never goes back", nowIsMillis},
		{"a timer fires once, no earlier than its delay", timerFiresOnce},
		{"a stopped timer never fires", stoppedTimerNeverFires},
	})
}

// testCase is one test of a suite, run on a fresh S.
type testCase[S any] struct {
	name string
	run  func(t conform.T, s S)
}

func runCases[S any](t conform.T, newS func(conform.T) S, cases []testCase[S]) {
	for _, c := range cases {
		t.Run(c.name, func(t conform.T) { c.run(t, newS(t)) })
	}
}

// Plausible bounds of a clock in ms: 2001-09-09 and 2128-06-11. A clock in
// seconds or nanoseconds falls outside.
const (
	minMillis = int64(1e12)
	maxMillis = int64(5e12)
)

func nowIsMillis(t conform.T, c core.Clock) {
	first := c.Now()
	assert.True(t, first >= minMillis && first <= maxMillis, "Now() = %d is not ms since the Unix epoch", first)
	last := first
	for range 1000 {
		n := c.Now()
		require.GreaterOrEqual(t, n, last, "Now went back")
		last = n
	}
	if a, ok := c.(Advancer); ok {
		a.Advance(1500 * time.Millisecond)
		assert.Equal(t, last+1500, c.Now(), "Advance(1.5s) moves Now by 1500 ms")
	}
}

// pass lets d of the clock's time pass: Advance on a virtual clock; on a
// real one the caller waits for the timer it set.
func pass(c core.Clock, d time.Duration) {
	if a, ok := c.(Advancer); ok {
		a.Advance(d)
	}
}

// delay is a timer's delay in the suite: long enough that a timer firing
// early shows, short enough for a real clock.
const delay = 30 * time.Millisecond

func timerFiresOnce(t conform.T, c core.Clock) {
	fired := make(chan int64, 2)
	start := c.Now()
	stop := c.AfterFunc(delay, func() { fired <- c.Now() })
	pass(c, delay)
	at := <-fired
	assert.GreaterOrEqual(t, at-start, delay.Milliseconds(), "fired %d ms after it was set", at-start)
	assert.False(t, stop(), "stop after the timer fired reports it did not stop it")
	waitLater(c)
	assert.Empty(t, fired, "the timer fired a second time")
}

func stoppedTimerNeverFires(t conform.T, c core.Clock) {
	fired := make(chan struct{}, 1)
	stop := c.AfterFunc(delay, func() { fired <- struct{}{} })
	assert.True(t, stop(), "stop before the timer fired reports it stopped it")
	assert.False(t, stop(), "a second stop reports nothing to stop")

	waitLater(c)
	assert.Empty(t, fired, "the stopped timer fired")
}

// waitLater sets a timer due after any the test set before and waits for
// it: by then the earlier ones have had their time. (On a virtual clock a
// timer that should not have fired may still be starting on its
// goroutine; the suite's checks of stop's result do not depend on that.)
func waitLater(c core.Clock) {
	later := make(chan struct{})
	c.AfterFunc(2*delay, func() { close(later) })
	pass(c, 2*delay)
	<-later
}
