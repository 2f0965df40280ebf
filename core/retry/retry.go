package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Clock is what waiting needs from the host: core.Clock has this shape.
type Clock interface {
	// Now is the time in integer milliseconds since the Unix epoch.
	Now() int64
	// AfterFunc calls f in its own goroutine after d and returns a function
	// that cancels the call, reporting whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Policy is a named backoff schedule: wait Initial before the first retry,
// doubling each time up to Max, and stop retrying once Window has passed
// since the first attempt failed or after Retries retries, whichever comes
// first. (From the failure, not the attempt's start: Loop reads the clock
// only once something failed, so an attempt that succeeds, as nearly every
// event append does, costs no clock read, which is a host call in the
// guest and a JS call in a Durable Object.)
// A zero Window or Retries sets no limit of that kind; the zero Policy,
// having neither, never retries.
type Policy struct {
	Name    string
	Initial time.Duration
	Max     time.Duration
	Window  time.Duration
	Retries int
}

// The schedules of DESIGN §8.
const (
	WriteInitial = 100 * time.Millisecond
	WriteMax     = 2 * time.Second
	WriteWindow  = 30 * time.Second

	SettlementInitial = time.Second
	SettlementMax     = 10 * time.Second
	SettlementWindow  = 15 * time.Minute
)

// Write is the schedule around every event append: the whole transaction
// reruns, with the same event ids, for up to 30 s.
func Write() Policy {
	return Policy{Name: "write", Initial: WriteInitial, Max: WriteMax, Window: WriteWindow}
}

// Settlement is the schedule of lifecycle terminals and notices that
// nothing else would re-drive: up to 15 min, interruptible by shutdown.
func Settlement() Policy {
	return Policy{Name: "settlement", Initial: SettlementInitial, Max: SettlementMax, Window: SettlementWindow}
}

// Provider is the model provider's schedule: up to retries retries of one
// step, initial doubling to max. Its waits are durable (the turn sleeps in
// the database), so callers use Delay and Allows, not a Loop.
func Provider(retries int, initial, max time.Duration) Policy {
	return Policy{Name: "provider", Initial: initial, Max: max, Retries: retries}
}

// Wake is the schedule of a wake-up whose delivery (boot or sweep) failed:
// the handler cannot tell whether work remains, so it re-arms 1 s after the
// first failure, doubling to 1 min, for as long as the failures last. It
// has no limit (work may be waiting), so callers use Delay only.
func Wake() Policy {
	return Policy{Name: "wake", Initial: time.Second, Max: time.Minute}
}

// Validate reports a policy that cannot be followed.
func (p Policy) Validate() error {
	switch {
	case p.Window < 0 || p.Retries < 0:
		return fmt.Errorf("%s retry policy: negative limit", p.Name)
	case !p.retries():
		return nil
	case p.Initial <= 0 || p.Max < p.Initial:
		return fmt.Errorf("%s retry policy: delays must be positive, initial (%s) at most max (%s)", p.Name, p.Initial, p.Max)
	}
	return nil
}

func (p Policy) retries() bool { return p.Window > 0 || p.Retries > 0 }

// Delay is the wait before retry n+1, after n retries: Initial·2ⁿ, at most
// Max.
func (p Policy) Delay(n int) time.Duration {
	d := p.Initial
	for range n {
		if d > p.Max/2 { // doubling would pass Max (or overflow)
			return p.Max
		}
		d *= 2
	}
	return min(d, p.Max)
}

// Allows reports whether a retry may follow n retries by count (the window
// is the Schedule's to judge).
func (p Policy) Allows(n int) bool {
	return p.retries() && (p.Retries == 0 || n < p.Retries)
}

// Schedule follows a policy for one operation: when it began, how many
// retries it took.
type Schedule struct {
	p       Policy
	clock   Clock
	start   int64
	retries int
}

// Begin starts a schedule now: its window runs from here.
func (p Policy) Begin(clock Clock) *Schedule {
	return &Schedule{p: p, clock: clock, start: clock.Now()}
}

// Next returns the wait before the next attempt and counts it as taken, or
// ok = false once the policy is spent. A wait that would end past the
// window is cut to end at it, so the last attempt is made exactly as the
// window closes.
func (s *Schedule) Next() (wait time.Duration, ok bool) {
	if !s.p.Allows(s.retries) {
		return 0, false
	}
	wait = s.p.Delay(s.retries)
	if s.p.Window > 0 {
		left := time.Duration(s.start+s.p.Window.Milliseconds()-s.clock.Now()) * time.Millisecond
		if left <= 0 {
			return 0, false
		}
		wait = min(wait, left)
	}
	s.retries++
	return wait, true
}

// Retries is how many retries Next has granted.
func (s *Schedule) Retries() int { return s.retries }

// Elapsed is the time since the schedule began.
func (s *Schedule) Elapsed() time.Duration {
	return time.Duration(s.clock.Now()-s.start) * time.Millisecond
}

// ErrExhausted: the policy's window or retry count is spent.
var ErrExhausted = errors.New("retries exhausted")

// ErrStopped: the wait was cut short by its stop channel (shutdown).
var ErrStopped = errors.New("retry wait stopped")

// timer is one wait on a Clock: wait returns nil once it fired, ctx's error
// if ctx ends first, or ErrStopped if stop (which may be nil) closes first,
// stopping the timer when the wait ends early.
type timer struct {
	fired  chan struct{}
	cancel func() bool
}

func startTimer(clock Clock, d time.Duration) *timer {
	t := &timer{fired: make(chan struct{})}
	t.cancel = clock.AfterFunc(d, func() { close(t.fired) })
	return t
}

func (t *timer) wait(ctx context.Context, stop <-chan struct{}) error {
	select {
	case <-t.fired:
		return nil
	case <-ctx.Done():
		t.cancel()
		return ctx.Err()
	case <-stop:
		t.cancel()
		return ErrStopped
	}
}

// Wait describes one wait of a Loop, for its Waiting hook.
type Wait struct {
	Policy string
	Retry  int           // 1 for the first retry
	Delay  time.Duration // the wait
	Until  int64         // when the retry is made (ms)
	Err    error         // the failure being retried
}

// Loop runs an operation under a policy.
type Loop struct {
	Policy Policy
	Clock  Clock
	// Retryable says which failures to retry; nil retries every one.
	Retryable func(error) bool
	// Stop, when closed, ends a wait at once (the caller is shutting down).
	Stop <-chan struct{}
	// Waiting, if set, is called before each wait, once its timer is set;
	// the function it returns,
	// if not nil, is called after the wait, however it ended. Core releases
	// a lock there for the length of the wait and reports the wait to an
	// observer.
	Waiting func(Wait) (resume func())
}

// Run calls op (attempt 1, 2, …) until it succeeds, fails in a way that is
// not retryable (that error is returned as is), or the loop gives up: the
// policy is spent, ctx ends or Stop closes during a wait. Giving up returns
// an *Error carrying the last failure.
func (l Loop) Run(ctx context.Context, op func(attempt int) error) error {
	var s *Schedule
	for attempt := 1; ; attempt++ {
		err := op(attempt)
		if err == nil {
			return nil
		}
		if l.Retryable != nil && !l.Retryable(err) {
			return err
		}
		if s == nil {
			s = l.Policy.Begin(l.Clock)
		}
		wait, ok := s.Next()
		if !ok {
			return &Error{Policy: l.Policy.Name, Attempts: attempt, Elapsed: s.Elapsed(), Cause: ErrExhausted, Err: err}
		}
		// The timer is set before the hook hears of the wait, so whoever
		// drives a virtual clock from the hook can move time past it at once.
		// Until is read after it is set: a clock another wait moves meanwhile
		// may set the timer later than a reading taken before, and moving
		// time only to that earlier reading would leave it pending.
		t := startTimer(l.Clock, wait)
		until := l.Clock.Now() + wait.Milliseconds()
		var resume func()
		if l.Waiting != nil {
			resume = l.Waiting(Wait{Policy: l.Policy.Name, Retry: s.Retries(), Delay: wait, Until: until, Err: err})
		}
		serr := t.wait(ctx, l.Stop)
		if resume != nil {
			resume()
		}
		if serr != nil {
			return &Error{Policy: l.Policy.Name, Attempts: attempt, Elapsed: s.Elapsed(), Cause: serr, Err: err}
		}
	}
}

// Error is how a Loop gave up: Cause is ErrExhausted, ErrStopped or the
// context's error; Err is the last failure. errors.Is matches both.
type Error struct {
	Policy   string
	Attempts int
	Elapsed  time.Duration
	Cause    error
	Err      error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s retry gave up after %d attempts in %s (%v): %v", e.Policy, e.Attempts, e.Elapsed, e.Cause, e.Err)
}

// Unwrap returns the cause and the last failure.
func (e *Error) Unwrap() []error { return []error{e.Cause, e.Err} }
