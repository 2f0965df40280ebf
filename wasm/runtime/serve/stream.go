package serve

import (
	"slices"
	"sync"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/wasm/abi"
)

// A client that stops reading must not make the host hold every later part
// for it: the guest's Respond never blocks, so what the guest sends waits
// here until the HTTP writer writes it. Two things bound it.
//
// The guest drains (BootConfig.Drain, docs/abi.md §3): after each page of
// an event stream's catch-up it sends a drain part and reads the next page
// only once the writer has written everything before that part and fired
// the timer it names. So the catch-up waits for the client page by page,
// as on the other hosts, and the host holds about a page (at most 1 MiB of
// event data), not the log.
//
// The backlog rule is the Durable Object's (durableobject/stream_js.go),
// for what the guest sends without draining (live events, a guest older
// than ABI 1.9, which sends the whole catch-up at once). The backlog is
// the body bytes the guest sent that the writer has not finished writing
// (the part it is writing included); past maxBacklog, with no write finished for backlogPatience,
// the stream is cut: its parts are dropped, the response ends, and the
// guest's request is cancelled. The client reconnects with Last-Event-ID
// and catches up from the log. Both conditions, because a healthy stream's
// backlog passes maxBacklog at once (the guest sends a catch-up page, or
// more, in one call, faster than any connection takes it), and a slow but
// reading client keeps finishing writes. A drain part that waits with
// nothing taken for backlogPatience is answered all the same (as the
// Durable Object's Drain gives up): what the guest sends next meets the
// rule.
const (
	maxBacklog      = 1 << 20
	backlogPatience = 10 * time.Second
)

// realClock is the system clock, for the backlog rule: host.RealClock's
// twin, since host sits above this package and core may not read real
// time (its noclock test).
type realClock struct{}

func (realClock) Now() int64 { return time.Now().UnixMilli() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// stream queues one response's parts until the HTTP writer takes them; the
// guest's Respond never blocks.
type stream struct {
	clock core.Clock
	// cut is called, in a goroutine of its own, when the backlog rule cuts
	// the stream: it cancels the guest's request (not from inside Respond,
	// which runs in a guest call).
	cut func()
	// answer fires the timer a drain part names (the guest's Drain
	// returns).
	answer func(timer uint64)

	mu      sync.Mutex
	parts   []abi.ResponsePart // waiting for the writer, oldest first
	backlog int                // body bytes in parts and in the part being written
	took    int64              // ms: when a write last finished, or the backlog was last empty
	stop    func() bool        // the backlog timer, while one is armed
	// draining: a drain part waits for its answer, timer its timer.
	draining bool
	timer    uint64
	ended    bool
	dropped  bool          // cut by the backlog rule
	died     bool          // ended by its guest's death, not by the guest
	errType  api.ErrorType // why it ended without a head, if not a stopped guest
	errMsg   string
	notify   chan struct{}
}

func newStream(clock core.Clock, cut func(), answer func(timer uint64)) *stream {
	return &stream{clock: clock, cut: cut, answer: answer, notify: make(chan struct{}, 1)}
}

func (s *stream) push(p abi.ResponsePart) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return // cut: nothing more is kept
	}
	if s.backlog == 0 {
		s.took = s.clock.Now() // caught up until now
	}
	s.parts = append(s.parts, p)
	s.backlog += len(p.Body)
	switch p.Kind {
	case abi.PartEnd:
		s.ended = true
	case abi.PartDrain:
		s.draining, s.timer = true, p.Timer
	}
	s.enforceLocked()
	s.mu.Unlock()
	s.signal()
}

// enforceLocked applies the backlog rule: it cuts a stream past maxBacklog
// whose writer finished nothing for backlogPatience, or answers a drain
// part that waited that long, or arms a timer for when either would be
// due, since nothing else may come to check (the guest may send nothing
// more, and the writer waits in a write). Under s.mu.
func (s *stream) enforceLocked() {
	over := s.backlog > maxBacklog
	if s.dropped || !over && !s.draining {
		return
	}
	wait := backlogPatience - time.Duration(s.clock.Now()-s.took)*time.Millisecond
	if wait > 0 {
		if s.stop == nil {
			s.stop = s.clock.AfterFunc(wait, s.expire)
		}
		return
	}
	if !over {
		// The client took nothing for the patience while a drain part
		// waits: answer it, and let what the guest sends next meet the
		// rule.
		s.parts = slices.DeleteFunc(s.parts, func(p abi.ResponsePart) bool { return p.Kind == abi.PartDrain })
		s.draining = false
		go s.answer(s.timer)
		return
	}
	// The client stopped reading: drop what waits for it and end.
	s.parts, s.backlog, s.ended, s.dropped, s.draining = nil, 0, true, true, false
	s.stopTimerLocked()
	if s.cut != nil {
		go s.cut()
	}
	s.signal()
}

// expire is the backlog timer: the rule again, as of now.
func (s *stream) expire() {
	s.mu.Lock()
	s.stop = nil
	s.enforceLocked()
	s.mu.Unlock()
}

// next takes the oldest part for the writer; done when none is left and
// the stream ended.
func (s *stream) next() (p abi.ResponsePart, ok, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.parts) == 0 {
		return p, false, s.ended
	}
	p = s.parts[0]
	s.parts[0] = abi.ResponsePart{} // the writer holds it now; dropped parts are freed
	s.parts = s.parts[1:]
	if len(s.parts) == 0 {
		s.parts = nil
	}
	return p, true, false
}

// wrote tells the stream the writer finished writing n body bytes: the
// client is taking what is sent.
func (s *stream) wrote(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped {
		return
	}
	s.backlog -= n
	s.took = s.clock.Now()
	if s.backlog <= maxBacklog && !s.draining {
		s.stopTimerLocked()
	}
}

// drained tells the stream the writer reached the drain part naming
// timer: everything before it was written. It reports whether the part
// still waits for its answer (it was not answered early), which the
// caller then gives.
func (s *stream) drained(timer uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining || s.timer != timer {
		return false
	}
	s.draining = false
	if s.backlog <= maxBacklog {
		s.stopTimerLocked()
	}
	return true
}

// close stops the backlog timer once the writer is done with the stream.
func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopTimerLocked()
}

func (s *stream) stopTimerLocked() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// abort ends the stream for a guest that died with the request (or could
// not be handed it): what it sent before is all there is. A stream the
// guest had ended (its end part sent before it died) stays complete.
func (s *stream) abort() {
	s.mu.Lock()
	if !s.ended {
		s.ended, s.died = true, true
	}
	s.mu.Unlock()
	s.signal()
}

// diedShort reports whether the stream ended by its guest's death rather
// than by the guest's end part.
func (s *stream) diedShort() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.died
}

// fail ends the stream with an error the client is answered with, unless
// a head was sent.
func (s *stream) fail(typ api.ErrorType, msg string) {
	s.mu.Lock()
	s.ended, s.errType, s.errMsg = true, typ, msg
	s.mu.Unlock()
	s.signal()
}

func (s *stream) failure() (api.ErrorType, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errType, s.errMsg
}

func (s *stream) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}
