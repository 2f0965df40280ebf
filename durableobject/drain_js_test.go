//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
)

var _ httpmsg.Drainer = (*responseWriter)(nil)

// drainAsync runs Drain in a goroutine and lets it start waiting.
func drainAsync(w *responseWriter, ctx context.Context) <-chan error {
	out := make(chan error, 1)
	go func() { out <- w.Drain(ctx) }()
	waitIdle()
	return out
}

// Drain returns once the client took every chunk flushed, not before: an
// event stream's catch-up reads its next page of the log only then.
func TestDrainWaitsUntilTheClientTookEverything(t *testing.T) {
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
	require.NoError(t, w.Drain(context.Background()), "nothing flushed: nothing to wait for")
	_, _ = io.WriteString(w, "event: one\n\n")
	w.Flush()
	reader := (<-got).Get("body").Call("getReader")
	_, _ = io.WriteString(w, "event: two\n\n")
	w.Flush()

	done := drainAsync(w, context.Background())
	select {
	case err := <-done:
		t.Fatalf("Drain returned (%v) before the client read anything", err)
	default:
	}
	text := ""
	for text != "event: one\n\nevent: two\n\n" {
		text += readChunk(t, reader)
	}
	require.NoError(t, <-done)
	w.finish()
}

// A stream the client has taken everything of has nothing to drain:
// Drain returns nil at once, whatever its context, rather than waiting for
// progress that will not come.
func TestDrainOnACaughtUpStreamReturnsAtOnce(t *testing.T) {
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
	_, _ = io.WriteString(w, "event: one\n\n")
	w.Flush()
	reader := (<-got).Get("body").Call("getReader")
	require.Equal(t, "event: one\n\n", readChunk(t, reader))
	waitIdle() // the write's promise settles: the chunk is acknowledged
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, w.Drain(ctx))
	w.finish()
}

// A Drain gives up with its context, and on a stream already ended.
func TestDrainEndsWithContextAndStream(t *testing.T) {
	frozenClock(t)
	w, _ := streamOn(t, fakeWriter(1, "now", "never"))
	_, _ = io.WriteString(w, kiloEvent)
	w.Flush()
	ctx, cancel := context.WithCancel(context.Background())
	done := drainAsync(w, ctx)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)

	done = drainAsync(w, context.Background())
	w.mu.Lock()
	w.end(false)
	w.mu.Unlock()
	assert.ErrorIs(t, <-done, context.Canceled, "the stream ended while Drain waited")
}

// A client that took nothing for backlogPatience: with the backlog past
// maxBacklog, Drain aborts the stream as Write would; under it, Drain
// returns and leaves the rule to the writes that follow.
func TestDrainOnAStalledClient(t *testing.T) {
	clock := frozenClock(t)
	fake := fakeWriter(0, "never", "never")
	w, ctx := streamOn(t, fake)
	_, _ = io.WriteString(w, kiloEvent)
	w.Flush()
	waitIdle()
	*clock = clock.Add(backlogPatience)
	require.NoError(t, w.Drain(context.Background()), "a small backlog is left to Write's rule")
	assert.NoError(t, ctx.Err())

	for n := 0; n < 2*maxBacklog; n += len(kiloEvent) {
		w.mu.Lock()
		w.buf.WriteString(kiloEvent) // past Write's own check
		w.mu.Unlock()
	}
	require.ErrorIs(t, w.Drain(context.Background()), errBacklog)
	assert.Error(t, ctx.Err(), "the handler's context is cancelled")
	assert.Equal(t, 1, fake.Get("aborts").Int(), "the stream is aborted")
	w.finish()
}
