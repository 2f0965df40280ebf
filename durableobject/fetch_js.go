//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
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
			return nil, fetchError(req, fmt.Errorf("read request body: %w", err))
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
	// fetch rejects its Promise for what fails; a call that throws instead
	// fails the same way, never as a panic (a webhook's "tool panicked", a
	// model request's driver failure).
	sent, err := callJS(func() js.Value { return jsFetch.Invoke(req.URL.String(), init) })
	var res js.Value
	if err == nil {
		res, err = awaitCtx(ctx, sent)
	}
	if err != nil {
		stop()
		return nil, fetchError(req, err)
	}
	resp := &httpmsg.Response{StatusCode: res.Get("status").Int(), Header: httpmsg.Header{}, Request: req}
	if err := headersFromJS(resp.Header, js.Global().Get("Array").Call("from", res.Get("headers").Call("entries"))); err != nil {
		stop()
		ac.Call("abort") // the body is never read
		return nil, fetchError(req, err)
	}
	if b := res.Get("body"); b.Truthy() {
		resp.Body = newFetchBody(ctx, b.Call("getReader"), func() { ac.Call("abort") }, stop)
	} else {
		stop()
		resp.Body = httpmsg.NoBody
	}
	return resp, nil
}

// fetchError is a failed request's error as net/http's client gives it
// (a *url.Error naming the method and the URL, userinfo redacted): tools/web
// tells the model its reason alone, so a webhook's URL, whose path or query
// may be the operator's secret, goes no further than it does on the local
// server.
func fetchError(req *httpmsg.Request, err error) error {
	op := "Fetch"
	if m := req.Method; m != "" {
		op = m[:1] + strings.ToLower(m[1:])
	}
	return &url.Error{Op: op, URL: req.URL.Redacted(), Err: err}
}

// A model's answer streams hundreds of chunks, so a body's Read is on
// the per-chunk path: it starts the stream's read and waits for its
// settlement without a goroutine or a js.Func of its own. The settlement
// goes to two package-level functions bound to the body's id once per
// body (as a stream's callbacks are, stream_js.go), so nothing is ever
// released: a settlement arriving after Close finds no body under its id
// and does nothing.
var (
	bodiesMu   sync.Mutex
	bodies     = map[int]*fetchBody{}
	lastBodyID int

	// bodyRead: a read settled with {done, value}.
	bodyRead = js.FuncOf(func(_ js.Value, args []js.Value) any {
		if b := bodyOf(args); b != nil {
			r := arg1(args)
			if r.Get("done").Bool() {
				b.settle(readResult{done: true})
				return nil
			}
			v := r.Get("value")
			chunk := make([]byte, v.Get("length").Int())
			js.CopyBytesToGo(chunk, v)
			b.settle(readResult{chunk: chunk})
		}
		return nil
	})
	// bodyFailed: a read was rejected (an abort, a broken connection).
	bodyFailed = js.FuncOf(func(_ js.Value, args []js.Value) any {
		if b := bodyOf(args); b != nil {
			b.settle(readResult{err: errors.New(jsText(arg1(args)))})
		}
		return nil
	})
)

// bodyOf is the body whose id a bound callback got first.
func bodyOf(args []js.Value) *fetchBody {
	if len(args) == 0 || args[0].Type() != js.TypeNumber {
		return nil
	}
	bodiesMu.Lock()
	defer bodiesMu.Unlock()
	return bodies[args[0].Int()]
}

func arg1(args []js.Value) js.Value {
	if len(args) < 2 {
		return js.Undefined()
	}
	return args[1]
}

// readResult is one settled read of a body's stream.
type readResult struct {
	chunk []byte
	done  bool
	err   error
}

// fetchBody reads a fetch response's ReadableStream. At most one read of
// the stream is out at a time (Read holds mu while it waits).
type fetchBody struct {
	ctx    context.Context
	reader js.Value
	abort  func()
	stop   func() bool

	id       int
	onRead   js.Value        // bodyRead bound to id
	onFail   js.Value        // bodyFailed bound to id
	settled  chan readResult // the read out, once settled; one at most
	closing  chan struct{}   // closed by Close: ends a Read that waits
	closeOne sync.Once

	mu     sync.Mutex
	buf    []byte
	done   bool
	err    error
	closed bool
}

// newFetchBody registers a body for reader's settlements.
func newFetchBody(ctx context.Context, reader js.Value, abort func(), stop func() bool) *fetchBody {
	b := &fetchBody{ctx: ctx, reader: reader, abort: abort, stop: stop,
		settled: make(chan readResult, 1), closing: make(chan struct{})}
	bodiesMu.Lock()
	lastBodyID++
	b.id = lastBodyID
	bodies[b.id] = b
	bodiesMu.Unlock()
	b.onRead = bodyRead.Call("bind", js.Null(), b.id)
	b.onFail = bodyFailed.Call("bind", js.Null(), b.id)
	return b
}

// settle hands a read's settlement to the Read waiting for it. It never
// blocks: only one read is out at a time, and a Read that gave up (ctx,
// Close) reads no more.
func (b *fetchBody) settle(r readResult) {
	select {
	case b.settled <- r:
	default:
	}
}

// forget unregisters the body: later settlements do nothing.
func (b *fetchBody) forget() {
	bodiesMu.Lock()
	delete(bodies, b.id)
	bodiesMu.Unlock()
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
		b.reader.Call("read").Call("then", b.onRead, b.onFail)
		select {
		case r := <-b.settled:
			b.buf, b.done, b.err = r.chunk, r.done, r.err
		case <-b.ctx.Done():
			b.err = context.Cause(b.ctx) // the abort signal rejects the read too
		case <-b.closing:
			b.err = errors.New("read on closed body")
		}
		if b.done || b.err != nil {
			b.forget() // the stream settles no more reads of ours
		}
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// Close releases the stream: an unfinished body's fetch is aborted, and a
// Read waiting on it ends.
func (b *fetchBody) Close() error {
	b.abort() // a no-op once the body has ended
	b.stop()
	b.closeOne.Do(func() { close(b.closing) })
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.forget()
	return nil
}

// awaitCtx is await that gives up when ctx ends (the abort signal then
// rejects the promise too). It waits without a goroutine of its own: the
// callbacks release themselves when the promise settles, even after
// awaitCtx gave up.
func awaitCtx(ctx context.Context, p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	var onOK, onErr js.Func
	release := func() {
		onOK.Release()
		onErr.Release()
	}
	onOK = js.FuncOf(func(_ js.Value, args []js.Value) any {
		release()
		ch <- result{v: arg0(args)}
		return nil
	})
	onErr = js.FuncOf(func(_ js.Value, args []js.Value) any {
		release()
		ch <- result{err: errors.New(jsText(arg0(args)))}
		return nil
	})
	p.Call("then", onOK, onErr)
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return js.Undefined(), context.Cause(ctx)
	}
}
