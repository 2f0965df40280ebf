package retry_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/retry"
)

const start = 1767225600000

var ctx = context.Background()

func TestPolicyDelays(t *testing.T) {
	ms := func(d ...int) []time.Duration {
		out := make([]time.Duration, len(d))
		for i, v := range d {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	delays := func(p retry.Policy, n int) []time.Duration {
		var out []time.Duration
		for i := range n {
			out = append(out, p.Delay(i))
		}
		return out
	}
	assert.Equal(t, ms(100, 200, 400, 800, 1600, 2000, 2000), delays(retry.Write(), 7))
	assert.Equal(t, ms(1000, 2000, 4000, 8000, 10000, 10000), delays(retry.Settlement(), 6))
	assert.Equal(t, ms(1000, 2000, 4000, 8000), delays(retry.Provider(6, time.Second, time.Minute), 4))
	huge := retry.Policy{Initial: time.Second, Max: 1 << 62}
	assert.Equal(t, time.Duration(1<<62), huge.Delay(200), "doubling never overflows past Max")
	// A cap at the largest duration: one more doubling past it would wrap
	// around to a negative wait.
	uncapped := retry.Policy{Initial: time.Second, Max: math.MaxInt64}
	assert.Equal(t, time.Duration(math.MaxInt64), uncapped.Delay(200), "doubling never overflows")
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute}, delays(retry.Wake(), 8), "the wake re-arm: 1 s doubling to 1 min")

	for _, p := range []retry.Policy{retry.Write(), retry.Settlement(), retry.Provider(6, time.Second, time.Minute), retry.Wake(), {},
		{Name: "flat", Initial: time.Second, Max: time.Second, Retries: 3}} {
		assert.NoError(t, p.Validate(), p.Name)
	}
	assert.Error(t, retry.Policy{Name: "bad", Initial: time.Second, Max: time.Millisecond, Window: time.Minute}.Validate())
	assert.Error(t, retry.Policy{Name: "bad", Retries: -1}.Validate())
	assert.Error(t, retry.Policy{Name: "bad", Window: -time.Second}.Validate())
	assert.Error(t, retry.Policy{Name: "bad", Max: time.Second, Retries: 1}.Validate(), "no initial delay: retries would spin")

	p := retry.Provider(2, time.Second, time.Minute)
	assert.True(t, p.Allows(0))
	assert.True(t, p.Allows(1))
	assert.False(t, p.Allows(2), "two retries, then no more")
	assert.False(t, retry.Provider(0, time.Second, time.Minute).Allows(0), "model_retries none: a provider policy of no retries")
	assert.False(t, retry.Policy{}.Allows(0), "the zero policy never retries")
}

// The write schedule waits 100 ms doubling to 2 s and makes its last
// attempt exactly when its 30 s window closes.
func TestScheduleCutsTheLastWaitAtTheWindow(t *testing.T) {
	clock := fakehost.NewClock(start)
	s := retry.Write().Begin(clock)
	var waits []time.Duration
	for {
		d, ok := s.Next()
		if !ok {
			break
		}
		waits = append(waits, d)
		// A schedule that kept granting waits past its window would loop
		// here for ever on the fake clock: fail instead.
		require.Less(t, len(waits), 100, "the schedule never ends")
		clock.Advance(d)
	}
	var total time.Duration
	for _, d := range waits {
		total += d
	}
	assert.Equal(t, retry.WriteWindow, total, "the attempts span the window exactly")
	assert.Equal(t, 100*time.Millisecond, waits[0])
	assert.Equal(t, 2*time.Second, waits[len(waits)-2])
	assert.Equal(t, 900*time.Millisecond, waits[len(waits)-1], "the last wait is cut to the window")
	assert.Len(t, waits, 19)
	assert.Equal(t, 19, s.Retries())
	assert.Equal(t, retry.WriteWindow, s.Elapsed())
}

var errFlaky = errors.New("flaky")

// driveLoop runs l over op in a goroutine and advances the fake clock to
// the end of every wait the loop announces, until Run returns. Each wait's
// timer is set before the hook hears of it, and moving time to its Until
// fires it: else the test fails at once (the loop would wait for good).
func driveLoop(t *testing.T, clock *fakehost.Clock, l retry.Loop, op func(int) error) (error, []retry.Wait) {
	t.Helper()
	type heard struct {
		w       retry.Wait
		pending int // the clock's timers as the hook heard of the wait
	}
	waits, moved := make(chan heard), make(chan struct{})
	l.Clock = clock
	l.Waiting = func(w retry.Wait) func() { waits <- heard{w, clock.Pending()}; <-moved; return nil }
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, op) }()
	var seen []retry.Wait
	for {
		select {
		case h := <-waits:
			seen = append(seen, h.w)
			require.Equal(t, 1, h.pending, "the wait's timer is set before the hook hears of it")
			clock.Set(h.w.Until)
			require.Zero(t, clock.Pending(), "moving time to the wait's Until fired its timer")
			moved <- struct{}{}
		case err := <-done:
			return err, seen
		}
	}
}

func TestLoopRetriesUntilSuccessOnTheFakeClock(t *testing.T) {
	clock := fakehost.NewClock(start)
	calls := 0
	err, waits := driveLoop(t, clock, retry.Loop{Policy: retry.Write()}, func(attempt int) error {
		calls++
		assert.Equal(t, calls, attempt)
		if clock.Now() < start+1000 {
			return errFlaky
		}
		return nil
	})
	require.NoError(t, err)
	// Attempts at 0, 100, 300, 700, 1500 ms: the fifth succeeds.
	assert.Equal(t, 5, calls)
	require.Len(t, waits, 4)
	assert.Equal(t, retry.Wait{Policy: "write", Retry: 1, Delay: 100 * time.Millisecond, Until: start + 100, Err: errFlaky}, waits[0])
	assert.Equal(t, int64(start+1500), clock.Now())
}

func TestLoopGivesUpWhenTheWindowCloses(t *testing.T) {
	clock := fakehost.NewClock(start)
	calls := 0
	err, _ := driveLoop(t, clock, retry.Loop{Policy: retry.Write()}, func(int) error { calls++; return errFlaky })
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, retry.ErrExhausted)
	assert.ErrorIs(t, err, errFlaky, "the last failure is kept")
	assert.Equal(t, 20, calls, "the first attempt and 19 retries")
	assert.Equal(t, 20, re.Attempts)
	assert.Equal(t, retry.WriteWindow, re.Elapsed)
	assert.Equal(t, int64(start)+retry.WriteWindow.Milliseconds(), clock.Now())
	assert.Contains(t, err.Error(), "write retry gave up after 20 attempts")
}

// The window runs from the first failure, not from the first attempt's
// start: a slow first attempt (a busy timeout) leaves the whole window to
// the retries.
func TestLoopWindowStartsAtTheFirstFailure(t *testing.T) {
	clock := fakehost.NewClock(start)
	err, _ := driveLoop(t, clock, retry.Loop{Policy: retry.Write()}, func(attempt int) error {
		if attempt == 1 {
			clock.Advance(5 * time.Second) // the first attempt takes 5 s to fail
		}
		return errFlaky
	})
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.WriteWindow, re.Elapsed)
	assert.Equal(t, int64(start)+(5*time.Second+retry.WriteWindow).Milliseconds(), clock.Now())
}

// A failure the loop is told not to retry returns at once, unchanged, and
// never touches the clock: a test that does not advance time still ends.
func TestLoopReturnsPermanentFailuresAtOnce(t *testing.T) {
	clock := fakehost.NewClock(start)
	permanent := errors.New("permanent")
	calls := 0
	err := retry.Loop{Policy: retry.Write(), Clock: clock, Retryable: func(err error) bool { return err == errFlaky }}.
		Run(ctx, func(int) error { calls++; return permanent })
	assert.Same(t, permanent, err)
	assert.Equal(t, 1, calls)
	assert.Zero(t, clock.Pending())
}

// A policy limited by count alone (no window) makes exactly its retries,
// and the clock's time plays no part in when it stops.
func TestLoopStopsAfterItsRetryCount(t *testing.T) {
	clock := fakehost.NewClock(start)
	p := retry.Policy{Name: "count", Initial: time.Second, Max: 4 * time.Second, Retries: 2}
	calls := 0
	err, waits := driveLoop(t, clock, retry.Loop{Policy: p}, func(int) error { calls++; return errFlaky })
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, retry.ErrExhausted)
	assert.Equal(t, 3, calls, "the first attempt and two retries")
	assert.Equal(t, 3, re.Attempts)
	require.Len(t, waits, 2)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, []time.Duration{waits[0].Delay, waits[1].Delay})
}

// Each wait the Waiting hook hears of numbers its retry from 1 and carries
// the wait actually taken: the last one cut to the window, not the
// schedule's uncut delay.
func TestWaitsReportTheRetryNumberAndTheCutDelay(t *testing.T) {
	clock := fakehost.NewClock(start)
	err, waits := driveLoop(t, clock, retry.Loop{Policy: retry.Write()}, func(int) error { return errFlaky })
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Len(t, waits, 19)
	for i, w := range waits {
		assert.Equal(t, i+1, w.Retry)
	}
	last := waits[len(waits)-1]
	assert.Equal(t, 900*time.Millisecond, last.Delay, "the last wait is cut to the window")
	assert.Equal(t, int64(start)+retry.WriteWindow.Milliseconds(), last.Until)
}

// Giving up during a wait counts only the attempts made: the retry being
// waited for never ran.
func TestLoopCutShortCountsTheAttemptsMade(t *testing.T) {
	clock := fakehost.NewClock(start)
	stop := make(chan struct{})
	calls := 0
	l := retry.Loop{Policy: retry.Settlement(), Clock: clock, Stop: stop,
		Waiting: func(w retry.Wait) func() {
			if w.Retry == 2 || !assert.Equal(t, 1, clock.Pending(), "the wait's timer is set before the hook hears of it") {
				close(stop) // (fail, never hang)
			} else {
				clock.Set(w.Until)
				if !assert.Zero(t, clock.Pending(), "moving time to Until fired the wait's timer") {
					clock.Set(w.Until + time.Hour.Milliseconds()) // fail, never hang
				}
			}
			return nil
		}}
	err := l.Run(ctx, func(int) error { calls++; return errFlaky })
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, retry.ErrStopped)
	assert.Equal(t, 2, calls)
	assert.Equal(t, 2, re.Attempts)
	assert.Equal(t, time.Second, re.Elapsed)
}

func TestLoopWaitEndsOnStopAndOnContext(t *testing.T) {
	t.Run("stop", func(t *testing.T) {
		clock := fakehost.NewClock(start)
		stop := make(chan struct{})
		l := retry.Loop{Policy: retry.Settlement(), Clock: clock, Stop: stop,
			Waiting: func(retry.Wait) func() { close(stop); return nil }}
		err := l.Run(ctx, func(int) error { return errFlaky })
		assert.ErrorIs(t, err, retry.ErrStopped)
		assert.ErrorIs(t, err, errFlaky)
		assert.NotErrorIs(t, err, retry.ErrExhausted)
		assert.Zero(t, clock.Pending(), "the timer was stopped")
	})
	t.Run("context", func(t *testing.T) {
		clock := fakehost.NewClock(start)
		cctx, cancel := context.WithCancel(ctx)
		resumed := false
		l := retry.Loop{Policy: retry.Settlement(), Clock: clock,
			Waiting: func(retry.Wait) func() { cancel(); return func() { resumed = true } }}
		err := l.Run(cctx, func(int) error { return errFlaky })
		assert.ErrorIs(t, err, context.Canceled)
		assert.True(t, resumed, "the resume hook runs however the wait ended")
		assert.Zero(t, clock.Pending(), "the timer was stopped")
	})
}

// movingClock is a fake clock that another waiter moves on: every reading
// of the time is followed at once by a step forward, as when a second
// goroutine's wait is driven between this loop's clock calls.
type movingClock struct {
	*fakehost.Clock
	step time.Duration
}

func (c movingClock) Now() int64 {
	now := c.Clock.Now()
	c.Clock.Set(now + c.step.Milliseconds())
	return now
}

// A wait's Until is never earlier than its timer, even when the clock
// moves while the loop sets the wait up: moving time to Until, as a
// driver of a virtual clock does, fires the timer (else the loop would
// wait for good with nothing left to move the clock).
func TestMovingTimeToUntilFiresTheWaitOnAMovingClock(t *testing.T) {
	clock := movingClock{Clock: fakehost.NewClock(start), step: time.Second}
	var waits []retry.Wait
	l := retry.Loop{Policy: retry.Settlement(), Clock: clock,
		Waiting: func(w retry.Wait) func() {
			waits = append(waits, w)
			clock.Set(w.Until)
			assert.Zero(t, clock.Pending(), "moving time to Until fired the wait's timer")
			clock.Set(w.Until + time.Hour.Milliseconds()) // never hang, whatever Until said
			return nil
		}}
	err := l.Run(ctx, func(attempt int) error {
		if attempt == 1 {
			return errFlaky
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, waits, 1)
}
