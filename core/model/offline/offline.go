package offline

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/revenantrt/revenant/core/model"
)

// Timer starts delayed calls. core.Clock satisfies it; taking just this
// method keeps core out of the package's imports.
type Timer interface {
	// AfterFunc calls f in its own goroutine after d and returns a function
	// that cancels the call, reporting whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Options configures the offline model.
type Options struct {
	// WordDelay is the pause between two streamed words of a text answer.
	// Zero streams without pausing and never calls the Timer.
	WordDelay time.Duration
}

// MaxSleep caps the total pause asked for by /sleep directives, so a typo
// cannot park a session for days.
const MaxSleep = time.Hour

// Model is the offline model. It holds no state between calls.
type Model struct {
	timer Timer
	opts  Options
}

var _ model.Model = (*Model)(nil)

// New returns the offline model. timer may be nil when nothing ever waits
// (no WordDelay, no /sleep); a wait without a timer fails that Recv.
func New(timer Timer, opts Options) *Model {
	return &Model{timer: timer, opts: opts}
}

// Name implements model.Model.
func (m *Model) Name() string { return "offline" }

// Stream implements model.Model. The whole answer is decided here, from the
// request alone; the stream only paces it. A /fail directive fails here with
// a permanent *model.Error.
func (m *Model) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	steps, err := answer(req, m.opts.WordDelay)
	if err != nil {
		return nil, err
	}
	return &stream{timer: m.timer, steps: steps, closed: make(chan struct{})}, nil
}

// step is one chunk of an answer and the pause before it.
type step struct {
	wait  time.Duration
	chunk model.Chunk
}

var (
	errClosed  = errors.New("offline: stream closed")
	errNoTimer = errors.New("offline: a pause needs a timer, and none was given to New")
)

type stream struct {
	timer     Timer
	steps     []step
	closed    chan struct{} // closed by Close, so a waiting Recv ends
	closeOnce sync.Once
}

// Recv returns the next chunk after its pause. A step interrupted by ctx or
// Close is not consumed.
func (s *stream) Recv(ctx context.Context) (model.Chunk, error) {
	if err := ctx.Err(); err != nil {
		return model.Chunk{}, err
	}
	select {
	case <-s.closed:
		return model.Chunk{}, errClosed
	default:
	}
	if len(s.steps) == 0 {
		return model.Chunk{}, io.EOF
	}
	if err := s.wait(ctx, s.steps[0].wait); err != nil {
		return model.Chunk{}, err
	}
	c := s.steps[0].chunk
	s.steps = s.steps[1:]
	return c, nil
}

// wait pauses for d through the timer, ending early (and stopping the timer)
// when ctx ends or the stream is closed.
func (s *stream) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if s.timer == nil {
		return errNoTimer
	}
	fired := make(chan struct{})
	stop := s.timer.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	case <-s.closed:
		stop()
		return errClosed
	}
}

// Close ends the stream; a Recv waiting in another goroutine returns.
func (s *stream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}
