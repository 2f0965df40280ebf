//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall/js"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Fetch is the object's egress: an httpmsg.Doer over the Workers fetch, with an AbortController per request so that the request's
// context (an interrupt, the runner's stream-idle and step-wall limits, a
// closing instance) aborts the fetch and the body stream it returned.
//
// Why not syumai/workers' cloudflare/fetch (v0.33.0): its transport sets
// no signal, so a cancelled context cannot stop a fetch or a streaming
// body (an interrupted turn's model stream would run on), and its
// internal/jsutil reads globalThis.context.binding at package init, which
// panics in a Durable Object started with Go's wasm_exec.js (syumai's
// entry, which sets that global per request, is not used here). Go's own
// net/http js transport sets credentials "same-origin", which workerd
// refuses. This one is the few lines the object needs.
//
// The request body is read whole before the fetch (model requests and
// tool calls are small and bounded by the runner); the response body
// streams chunk by chunk (server-sent events). Redirects are not followed
// ("manual"), as a Doer never follows them: a 3xx comes back as it is, and
// the http_request tool follows it itself after checking the next URL
// against its egress policy (tools/web).
type Fetch struct{}

var _ httpmsg.Doer = Fetch{}

var (
	jsFetch           = js.Global().Get("fetch")
	jsAbortController = js.Global().Get("AbortController")
)

// Do implements httpmsg.Doer.
func (Fetch) Do(req *httpmsg.Request) (*httpmsg.Response, error) {
	ctx := req.Context()
	if req.URL == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("fetch: the request has no URL")
	}
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("fetch %s: read request body: %w", req.URL.Redacted(), err)
		}
		body = b
	}
	ac := jsAbortController.New()
	init := jsObject.New()
	init.Set("method", req.Method)
	init.Set("redirect", "manual")
	init.Set("signal", ac.Get("signal"))
	init.Set("headers", headersToJS(req.Header))
	if len(body) > 0 {
		u := jsUint8Array.New(len(body))
		js.CopyBytesToJS(u, body)
		init.Set("body", u)
	}
	stop := context.AfterFunc(ctx, func() { ac.Call("abort") })
	res, err := awaitCtx(ctx, jsFetch.Invoke(req.URL.String(), init))
	if err != nil {
		stop()
		return nil, fmt.Errorf("fetch %s: %w", req.URL.Redacted(), err)
	}
	resp := &httpmsg.Response{StatusCode: res.Get("status").Int(), Header: httpmsg.Header{}, Request: req}
	if err := headersFromJS(resp.Header, js.Global().Get("Array").Call("from", res.Get("headers").Call("entries"))); err != nil {
		stop()
		ac.Call("abort") // the body is never read
		return nil, fmt.Errorf("fetch %s: %w", req.URL.Redacted(), err)
	}
	if b := res.Get("body"); b.Truthy() {
		resp.Body = &fetchBody{ctx: ctx, reader: b.Call("getReader"), abort: func() { ac.Call("abort") }, stop: stop}
	} else {
		stop()
		resp.Body = httpmsg.NoBody
	}
	return resp, nil
}

// fetchBody reads a fetch response's ReadableStream from a goroutine.
type fetchBody struct {
	ctx    context.Context
	reader js.Value
	abort  func()
	stop   func() bool

	mu     sync.Mutex
	buf    []byte
	done   bool
	err    error
	closed bool
}

func (b *fetchBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 {
		if b.closed {
			return 0, errors.New("read on closed body")
		}
		if b.done {
			return 0, io.EOF
		}
		if b.err != nil {
			return 0, b.err
		}
		chunk, err := awaitCtx(b.ctx, b.reader.Call("read"))
		switch {
		case err != nil:
			b.err = err
		case chunk.Get("done").Bool():
			b.done = true
		default:
			v := chunk.Get("value")
			buf := make([]byte, v.Get("length").Int())
			js.CopyBytesToGo(buf, v)
			b.buf = buf
		}
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// Close releases the stream: an unfinished body's fetch is aborted, which
// also ends a Read waiting on it.
func (b *fetchBody) Close() error {
	b.abort() // a no-op once the body has ended
	b.stop()
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// awaitCtx is await that gives up when ctx ends (the abort signal then
// rejects the promise too).
func awaitCtx(ctx context.Context, p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := await(p)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return js.Undefined(), context.Cause(ctx)
	}
}
