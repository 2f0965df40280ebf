//go:build js && wasm

package durableobject

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall/js"
	"testing"

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
	chunk, err := await(reader.Call("read"))
	require.NoError(t, err)
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
	got := make(chan js.Value, 1)
	ctx, cancel := context.WithCancel(context.Background())
	w := newResponseWriter(func(v js.Value) { got <- v }, cancel)
	w.Flush()
	resp := <-got
	_, err := await(resp.Get("body").Call("cancel"))
	require.NoError(t, err)
	<-ctx.Done()
	_, err = io.WriteString(w, "late")
	assert.ErrorIs(t, err, context.Canceled)
	w.finish()
}

// A 204 has a null body: a JS Response refuses a body for it.
func TestResponseNoContent(t *testing.T) {
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
	w.WriteHeader(http.StatusNoContent)
	w.finish()
	resp := <-got
	assert.Equal(t, 204, resp.Get("status").Int())
	assert.True(t, resp.Get("body").IsNull())
}

// readChunk reads one chunk of a stream's reader as text ("" at its end).
func readChunk(t *testing.T, reader js.Value) string {
	t.Helper()
	chunk, err := await(reader.Call("read"))
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
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
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
	got := make(chan js.Value, 1)
	w := newResponseWriter(func(v js.Value) { got <- v }, func() {})
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

	w = newResponseWriter(func(v js.Value) { got <- v }, func() {})
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

// A client that stops taking the stream's chunks does not make the object
// hold every later event: past maxBacklog waiting bytes the stream ends
// (closed, the request's context cancelled, later writes refused), and
// the client catches up from the log when it reconnects.
func TestResponseEndsStreamPastBacklog(t *testing.T) {
	fake := js.Global().Call("eval", `(() => {
		const w = { desiredSize: 0, writes: 0, closes: 0, closed: new Promise(() => {}),
			ready: new Promise(() => {}), // the client never takes a chunk
			write() { w.writes++; return new Promise(() => {}); },
			close() { w.closes++; return new Promise(() => {}); } };
		return w;
	})()`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newResponseWriter(func(js.Value) {}, cancel)
	w.mu.Lock()
	w.open(fake)
	w.mu.Unlock()

	event := "data: " + strings.Repeat("x", 1000) + "\n\n"
	var err error
	n := 0
	for ; err == nil && n < 2*maxBacklog/len(event); n++ {
		_, err = io.WriteString(w, event)
		w.Flush()
		waitIdle()
	}
	require.ErrorIs(t, err, errBacklog, "the stream ends once maxBacklog bytes wait")
	assert.Less(t, n, maxBacklog/len(event)+4, "ended just past the backlog")
	assert.Error(t, ctx.Err(), "the handler's context is cancelled")
	assert.Equal(t, 1, fake.Get("closes").Int(), "the stream is closed")
	_, err = io.WriteString(w, event)
	assert.Error(t, err, "later writes are refused")
	w.finish()
	streamsMu.Lock()
	defer streamsMu.Unlock()
	assert.Empty(t, streams)
}
