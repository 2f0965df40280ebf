//go:build js && wasm

package durableobject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall/js"

	"github.com/revenantrt/revenant/core/httpmsg"
)

var (
	jsResponse        = js.Global().Get("Response")
	jsTransformStream = js.Global().Get("TransformStream")
	jsObject          = js.Global().Get("Object")
)

// newRequest builds the Go request from what the shim passes: method,
// URL, headers as [name, value] pairs, and the body already read into an
// ArrayBuffer (or undefined). Reading the body in JS keeps Go from
// pulling a ReadableStream chunk by chunk; API bodies are small (capped
// by the handler).
func newRequest(ctx context.Context, method, url string, headers, body js.Value) (*httpmsg.Request, error) {
	var b []byte
	if body.Type() == js.TypeObject {
		u := jsUint8Array.New(body)
		b = make([]byte, u.Get("length").Int())
		js.CopyBytesToGo(b, u)
	}
	r, err := httpmsg.NewRequest(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if err := headersFromJS(r.Header, headers); err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	r.ContentLength = int64(len(b))
	r.RemoteAddr = "127.0.0.1:0" // the front Worker is the only caller
	return r, nil
}

// responseWriter turns a Go handler's answer into a JS Response. An
// answer that never flushes is sent whole when the handler returns; the
// first Flush (SSE) sends the status and headers at once and streams
// every later flushed write through a TransformStream (stream_js.go has
// how chunks are coalesced). A client that goes away makes the stream's
// writes fail, which cancels the request's context (the SSE handler ends)
// and stops further writes.
type responseWriter struct {
	header  httpmsg.Header
	status  int
	buf     bytes.Buffer   // the whole answer, or once streaming what is not sent yet
	respond func(js.Value) // settles the fetch Promise; called once
	cancel  context.CancelFunc

	mu sync.Mutex
	stream
}

func newResponseWriter(respond func(js.Value), cancel context.CancelFunc) *responseWriter {
	return &responseWriter{header: httpmsg.Header{}, respond: respond, cancel: cancel}
}

func (w *responseWriter) Header() httpmsg.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// Write buffers p; once streaming, Flush sends it.
func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(httpmsg.StatusOK)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.streaming() {
		return w.buf.Write(p)
	}
	if w.closed || w.ended {
		return 0, context.Canceled
	}
	if w.unacked == 0 && w.buf.Len() == 0 {
		w.took = now() // caught up until now
	}
	w.buf.Write(p)
	if w.abandonIfStalled() {
		return 0, errBacklog
	}
	if w.buf.Len() >= maxUnflushed {
		w.push()
	}
	return len(p), nil
}

// errBacklog ends a stream whose client stopped taking its chunks.
var errBacklog = errors.New("durableobject: the client is not reading the stream")

// Flush starts streaming: the Response is sent now, with what was
// written so far as its first chunk. Once streaming, it sends what was
// written since (sendSoon).
func (w *responseWriter) Flush() {
	w.WriteHeader(httpmsg.StatusOK)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.streaming() {
		w.sendSoon()
		return
	}
	ts := jsTransformStream.New()
	w.open(ts.Get("writable").Call("getWriter"))
	if w.buf.Len() > 0 {
		w.send(w.buf.Bytes())
		w.buf.Reset()
	}
	w.respond(jsResponse.New(ts.Get("readable"), w.init()))
}

// finish ends the answer once the handler returned.
func (w *responseWriter) finish() {
	w.WriteHeader(httpmsg.StatusOK)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.streaming() {
		w.end(false)
		return
	}
	body := js.Null()
	if w.buf.Len() > 0 && bodyAllowed(w.status) {
		u := jsUint8Array.New(w.buf.Len())
		js.CopyBytesToJS(u, w.buf.Bytes())
		body = u
	}
	w.respond(jsResponse.New(body, w.init()))
}

// init is the Response's init: status and headers.
func (w *responseWriter) init() js.Value {
	init := jsObject.New()
	init.Set("status", w.status)
	init.Set("headers", headersToJS(w.header))
	return init
}

// bodyAllowed: a JS Response with these statuses must have a null body.
func bodyAllowed(status int) bool {
	switch status {
	case 101, 204, 205, 304:
		return false
	}
	return true
}
