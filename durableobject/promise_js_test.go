//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A panic in an entry point rejects its Promise and the program keeps
// serving: an escaped panic would end the Go program for the object.
func TestEntryPanicRejectsAndProgramGoesOn(t *testing.T) {
	calls := 0
	f := entry("probe", func([]js.Value) (any, error) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return "ok", nil
	})
	defer f.Release()
	_, err := await(f.Invoke())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "boom")
	v, err := await(f.Invoke())
	require.NoError(t, err)
	assert.Equal(t, "ok", v.String())
}

// settleWait bounds a test's wait for something the code under test must
// do of itself: a Promise it settles, a context it ends, a chunk it sends.
// Unbounded, a missing answer reaches go test's 10-minute timeout and a
// dump of goroutines that names no fault; bounded, the test fails within
// seconds and says what never came. Generous: each of these comes within
// a few event-loop turns on a working object.
const settleWait = 5 * time.Second

// awaitWithin is await for a Promise that must settle within settleWait;
// the test fails, naming what, when it has not.
func awaitWithin(t *testing.T, p js.Value, what string) (js.Value, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	v, err := awaitCtx(ctx, p)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: not settled within %v", what, settleWait)
	}
	return v, err
}

// doneWithin fails the test, naming what, when ctx has not ended within
// settleWait.
func doneWithin(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(settleWait):
		t.Fatalf("%s: not within %v", what, settleWait)
	}
}

// endedWriter is a responseWriter whose Response is sent on the channel
// returned, cancel its request's cancel. Its stream is ended when the
// test ends: one that fails mid-stream leaves no stream registered, which
// a later test's check that ended streams are forgotten would report as
// its own failure.
func endedWriter(t *testing.T, cancel func()) (*responseWriter, <-chan js.Value) {
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, cancel)
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.streaming() {
			w.end(true)
		}
	})
	return w, got
}

// readBody reads a JS Response's body as text (from a goroutine).
func readBody(t *testing.T, resp js.Value) string {
	t.Helper()
	v, err := await(resp.Call("text"))
	require.NoError(t, err)
	return v.String()
}

// An answer that never flushes is sent whole, with its status and headers.
func TestResponseWholeAnswer(t *testing.T) {
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"x"}`)
	w.finish()
	resp := <-got
	assert.Equal(t, 201, resp.Get("status").Int())
	assert.Equal(t, "application/json", resp.Get("headers").Call("get", "content-type").String())
	assert.Equal(t, `{"id":"x"}`, readBody(t, resp))
}

// The first Flush sends the Response while the handler still runs (SSE):
// the client reads the first chunk before the handler wrote the next.
func TestResponseStreamsAfterFlush(t *testing.T) {
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: one\n\n")
	w.Flush()
	resp := <-got
	require.Equal(t, 200, resp.Get("status").Int())
	reader := resp.Get("body").Call("getReader")
	// Bounded: a first chunk held back would wait for a write that never
	// comes.
	chunk, err := awaitWithin(t, reader.Call("read"), "the first chunk, written before the Flush")
	require.NoError(t, err, "the first chunk, written before the Flush, is sent by it")
	b := make([]byte, chunk.Get("value").Get("length").Int())
	js.CopyBytesToGo(b, chunk.Get("value"))
	assert.Equal(t, "event: one\n\n", string(b), "sent before the handler ended")
	_, _ = io.WriteString(w, "event: two\n\n")
	w.finish()
	rest := ""
	for {
		chunk, err := await(reader.Call("read"))
		require.NoError(t, err)
		if chunk.Get("done").Bool() {
			break
		}
		b := make([]byte, chunk.Get("value").Get("length").Int())
		js.CopyBytesToGo(b, chunk.Get("value"))
		rest += string(b)
	}
	assert.Equal(t, "event: two\n\n", rest)
}

// A client that goes away cancels the request's context (ends the SSE
// handler) and later writes fail instead of enqueueing into a dead stream.
func TestResponseCancelEndsRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w, got := endedWriter(t, cancel)
	w.Flush()
	resp := <-got
	_, err := awaitWithin(t, resp.Get("body").Call("cancel"), "the client's cancel of the body")
	require.NoError(t, err)
	doneWithin(t, ctx, "the client went away but the request's context was not cancelled")
	_, err = io.WriteString(w, "late")
	assert.ErrorIs(t, err, context.Canceled)
	w.finish()
}

// A 204 has a null body: a JS Response refuses a body for it (it throws),
// so bytes a handler wrote after a 204 are dropped, as net/http does.
func TestResponseNoContent(t *testing.T) {
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
	w.WriteHeader(http.StatusNoContent)
	_, _ = io.WriteString(w, "not for a 204")
	w.finish()
	resp := <-got
	assert.Equal(t, 204, resp.Get("status").Int())
	assert.True(t, resp.Get("body").IsNull())
}

// readChunk reads one chunk of a stream's reader as text ("" at its end).
// Bounded: a chunk the writer flushed but never sent (it waits on a ready
// it no longer watches) fails the test, not go test's timeout.
func readChunk(t *testing.T, reader js.Value) string {
	t.Helper()
	chunk, err := awaitWithin(t, reader.Call("read"), "a flushed chunk (or the stream's end) never reached the reader")
	require.NoError(t, err)
	if chunk.Get("done").Bool() {
		return ""
	}
	b := make([]byte, chunk.Get("value").Get("length").Int())
	js.CopyBytesToGo(b, chunk.Get("value"))
	return string(b)
}

// An event flushed while the stream is idle leaves at once; events
// flushed while the client has not taken the last chunk leave together,
// as one chunk, once it has; and an event's lines are one chunk.
func TestResponseCoalescesWhileStreamBusy(t *testing.T) {
	w, got := endedWriter(t, func() {})
	_, _ = io.WriteString(w, ": ok\n\n")
	w.Flush()
	reader := (<-got).Get("body").Call("getReader")
	assert.Equal(t, ": ok\n\n", readChunk(t, reader))

	_, _ = io.WriteString(w, "id: 1\n")
	_, _ = io.WriteString(w, "event: one\n\n")
	w.Flush()
	assert.Equal(t, "id: 1\nevent: one\n\n", readChunk(t, reader), "an idle stream: sent at once, one chunk")

	// Nobody reads now: "two" goes out, "three" and "four" wait for it.
	for _, e := range []string{"two", "three", "four"} {
		_, _ = io.WriteString(w, "event: "+e+"\n\n")
		w.Flush()
		waitIdle() // the goroutine that sends runs
	}
	assert.Equal(t, "event: two\n\n", readChunk(t, reader))
	assert.Equal(t, "event: three\n\nevent: four\n\n", readChunk(t, reader), "flushed while busy: one chunk")
	w.finish()
	assert.Equal(t, "", readChunk(t, reader), "closed after the last chunk")
	streamsMu.Lock()
	defer streamsMu.Unlock()
	assert.Empty(t, streams, "an ended stream is forgotten")
}

// What waits for the stream when the handler ends still goes out, before
// the end; a handler that panics mid-stream errors the stream.
func TestResponseFinishSendsWhatWaits(t *testing.T) {
	w, got := endedWriter(t, func() {})
	_, _ = io.WriteString(w, "a\n\n")
	w.Flush()
	reader := (<-got).Get("body").Call("getReader")
	_, _ = io.WriteString(w, "b\n\n")
	w.Flush()
	waitIdle()
	_, _ = io.WriteString(w, "c\n\n")
	w.finish()
	rest := ""
	for s := readChunk(t, reader); s != ""; s = readChunk(t, reader) {
		rest += s
	}
	assert.Equal(t, "a\n\nb\n\nc\n\n", rest)

	w, got = endedWriter(t, func() {})
	w.Flush()
	reader = (<-got).Get("body").Call("getReader")
	w.fail()
	_, err := await(reader.Call("read"))
	assert.Error(t, err, "a failed handler errors its stream")
	streamsMu.Lock()
	defer streamsMu.Unlock()
	assert.Empty(t, streams)
}

// waitIdle lets every goroutine that can run, run, and the JS promises
// settled so far deliver, by waiting on a timer of zero delay.
func waitIdle() { nextTask() }

// A stream whose reader went away unnoticed (wrangler dev does not pass a
// client's disconnect on) can keep desiredSize at 0 with ready already
// resolved. What waited for ready is sent once it resolves, and ready is
// not asked again in a loop: that loop of microtasks never yielded the
// isolate, and every object and the front stopped answering.
func TestResponseSendsOnceWhenReadyButFull(t *testing.T) {
	fake := js.Global().Call("eval", `(() => {
		const w = { desiredSize: 0, readies: 0, chunks: [], closed: new Promise(() => {}),
			write(c) { w.chunks.push(new TextDecoder().decode(c)); return Promise.resolve(); },
			close() { return Promise.resolve(); } };
		// Past 100 asks, a ready that never settles: a spinning writer stops
		// here instead of hanging the test.
		Object.defineProperty(w, "ready", { get() { w.readies++; return w.readies > 100 ? new Promise(() => {}) : Promise.resolve(); } });
		return w;
	})()`)
	chunks := func() []string {
		var out []string
		for i := range fake.Get("chunks").Length() {
			out = append(out, fake.Get("chunks").Index(i).String())
		}
		return out
	}
	w := newResponseWriter(func(js.Value) {}, func() {})
	w.mu.Lock()
	w.open(fake)
	w.mu.Unlock()

	_, _ = io.WriteString(w, "event: one\n\n")
	w.Flush()
	waitIdle()
	assert.Equal(t, []string{"event: one\n\n"}, chunks(), "sent once ready resolved")
	assert.Equal(t, 1, fake.Get("readies").Int(), "ready asked once per wait")

	_, _ = io.WriteString(w, "event: two\n\n")
	w.Flush()
	waitIdle()
	assert.Equal(t, []string{"event: one\n\n", "event: two\n\n"}, chunks())
	assert.Equal(t, 2, fake.Get("readies").Int())
	w.finish()
}

// fakeWriter is a stream writer stand-in (JS) with the given behaviour:
// desiredSize, whether ready resolves ("now" or "never"), and whether
// writes settle ("settle" or "never"). It records what was written and
// whether it was closed or aborted.
func fakeWriter(desiredSize int, ready, writes string) js.Value {
	return js.Global().Call("eval", `(() => {
		const never = () => new Promise(() => {});
		const w = { desiredSize: `+strconv.Itoa(desiredSize)+`, bytes: 0, closes: 0, aborts: 0, closed: never(),
			write(c) { w.bytes += c.length; return "`+writes+`" === "settle" ? Promise.resolve() : never(); },
			close() { w.closes++; return never(); },
			abort() { w.aborts++; return Promise.resolve(); } };
		Object.defineProperty(w, "ready", { get() { return "`+ready+`" === "now" ? Promise.resolve() : never(); } });
		return w;
	})()`)
}

// frozenClock sets the backlog rule's clock to a fixed time the test
// moves (Date.now does not move during synchronous JS either).
func frozenClock(t *testing.T) *time.Time {
	at := time.Unix(1_800_000_000, 0)
	old := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = old })
	return &at
}

// streamOn makes a streaming responseWriter on writer whose cancel is
// observable.
func streamOn(t *testing.T, writer js.Value) (*responseWriter, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := newResponseWriter(func(js.Value) {}, cancel)
	w.mu.Lock()
	w.open(writer)
	w.mu.Unlock()
	return w, ctx
}

var kiloEvent = "data: " + strings.Repeat(".", 1000) + "\n\n" // an event of about 1 KB

// A handler that writes a lot between flushes still streams: once
// maxUnflushed bytes wait, they are sent without a Flush, so one long
// write burst neither holds the client back nor grows the buffer unbounded.
func TestResponseSendsEveryMaxUnflushedWithoutAFlush(t *testing.T) {
	frozenClock(t)
	fake := fakeWriter(1, "now", "settle")
	w, _ := streamOn(t, fake)
	n := 0
	for n < maxUnflushed+len(kiloEvent) {
		k, err := io.WriteString(w, kiloEvent)
		require.NoError(t, err)
		n += k
	}
	waitIdle()
	assert.GreaterOrEqual(t, fake.Get("bytes").Int(), maxUnflushed, "sent before any Flush")
	w.mu.Lock()
	w.end(false)
	w.mu.Unlock()
}

// A healthy stream's backlog passes maxBacklog within one synchronous
// burst (a catch-up page written before JS can take a chunk): it is not
// ended for that; everything is delivered once JS runs, and a stream that
// took every chunk has no backlog however long it then stays quiet.
func TestResponseBurstPastBacklogKeepsStream(t *testing.T) {
	clock := frozenClock(t)
	fake := fakeWriter(0, "now", "settle")
	w, ctx := streamOn(t, fake)
	n := 0
	for n < 2*maxBacklog {
		k, err := io.WriteString(w, kiloEvent)
		require.NoError(t, err, "a burst is no stall")
		n += k
	}
	w.Flush()
	waitIdle()
	waitIdle()
	assert.NoError(t, ctx.Err())
	assert.Equal(t, n, fake.Get("bytes").Int(), "every byte delivered")
	assert.Zero(t, fake.Get("aborts").Int())
	*clock = clock.Add(2 * backlogPatience)
	for range 2 * maxBacklog / len(kiloEvent) {
		_, err := io.WriteString(w, kiloEvent)
		require.NoError(t, err, "a quiet stream that took everything is no stall")
	}
	w.finish()
}

// A client that stops reading (ready never resolves) does not make the
// object hold every later event: once the backlog is past maxBacklog and
// nothing was taken for backlogPatience, the stream is aborted, the
// handler's context cancelled and later writes refused.
func TestResponseAbortsStreamWhenClientStopsReading(t *testing.T) {
	clock := frozenClock(t)
	fake := fakeWriter(0, "never", "never")
	w, ctx := streamOn(t, fake)
	for n := 0; n < 2*maxBacklog; n += len(kiloEvent) {
		_, err := io.WriteString(w, kiloEvent)
		require.NoError(t, err, "not yet stalled for backlogPatience")
		w.Flush()
	}
	waitIdle()
	*clock = clock.Add(backlogPatience)
	_, err := io.WriteString(w, kiloEvent)
	require.ErrorIs(t, err, errBacklog)
	assert.Error(t, ctx.Err(), "the handler's context is cancelled")
	assert.Equal(t, 1, fake.Get("aborts").Int(), "the stream is aborted (a close would queue behind writes that never settle)")
	_, err = io.WriteString(w, kiloEvent)
	assert.Error(t, err, "later writes are refused")
	w.finish()
	streamsMu.Lock()
	defer streamsMu.Unlock()
	assert.Empty(t, streams)
}

// The stale stream of wrangler dev (ready resolved, desiredSize 0, writes
// that never settle): what is sent piles up unread in JS, so it counts as
// backlog too, and the stream is aborted by the same rule.
func TestResponseAbortsStaleStream(t *testing.T) {
	clock := frozenClock(t)
	fake := fakeWriter(0, "now", "never")
	w, ctx := streamOn(t, fake)
	var err error
	for n := 0; err == nil && n < 4*maxBacklog; n += len(kiloEvent) {
		_, err = io.WriteString(w, kiloEvent)
		w.Flush()
		waitIdle()
		*clock = clock.Add(backlogPatience / 100)
	}
	require.Error(t, ctx.Err(), "the stream was given up")
	assert.Equal(t, 1, fake.Get("aborts").Int())
	assert.LessOrEqual(t, fake.Get("bytes").Int(), maxBacklog+len(kiloEvent), "no more than the backlog was queued in JS")
	w.finish()
}
