//go:build wasip1

package main

import (
	"bytes"
	"context"
	"net/url"
	"sync"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/wasm/abi"
)

// requests tracks API requests in flight, so the host can cancel one (an
// event stream's client went away).
type requests struct {
	mu     sync.Mutex
	cancel map[uint64]func()
}

// serve runs one request through the handler in its own goroutine; the
// response leaves through the respond import as the handler writes it.
func (g *guest) serve(id uint64, in abi.Request) {
	ctx, cancel := context.WithCancel(context.Background())
	g.reqs.mu.Lock()
	if old := g.reqs.cancel[id]; old != nil {
		old()
	}
	g.reqs.cancel[id] = cancel
	g.reqs.mu.Unlock()
	u := &url.URL{Scheme: "http", Host: "guest", RawQuery: in.RawQuery}
	if p, err := url.PathUnescape(in.Path); err == nil {
		u.Path, u.RawPath = p, in.Path
	} else {
		u.Path = in.Path
	}
	// Parsed back from its text, as net/http's NewRequest did: a method
	// that is not a token, or a URL that does not parse, is a 400.
	r, err := httpmsg.NewRequest(ctx, in.Method, u.String(), bytes.NewReader(in.Body))
	w := &responseWriter{id: id, header: httpmsg.Header{}}
	if g.cfg.Drain {
		w.clock = g.clock
	}
	go func() {
		defer func() {
			g.reqs.mu.Lock()
			delete(g.reqs.cancel, id)
			g.reqs.mu.Unlock()
			cancel()
		}()
		if err != nil {
			w.WriteHeader(httpmsg.StatusBadRequest)
			w.end(false)
			return
		}
		if in.Header != nil {
			r.Header = in.Header
		}
		r.URL.RawPath = u.RawPath
		// The query as the host received it: a '#' in it is query text
		// on the local server (net/http keeps it there), not the start
		// of a fragment that parsing u's text back would cut off.
		r.URL.RawQuery, r.URL.Fragment, r.URL.RawFragment = in.RawQuery, "", ""
		r.Host = "guest"
		var hw httpmsg.ResponseWriter = w
		if testHooks {
			hw = testWriter(w, r)
		}
		if r.Method == httpmsg.MethodPost && r.URL.Path == "/v1/sessions" {
			hw = &createdWriter{ResponseWriter: w, g: g} // a create's 201 names its created_at
		}
		// A handler that failed after its head aborts (Abort): its answer
		// ends aborted, so the host cuts it short for the client
		// (docs/abi.md §6); an older host gets the clean end it knows.
		defer func() {
			p := recover()
			if p != nil && p != errAborted {
				panic(p)
			}
			w.end(p != nil && g.cfg.HostMinor >= abi.MinorAbort)
		}()
		g.handler.ServeHTTP(hw, r)
	}()
}

func (g *guest) cancelRequest(id uint64) {
	g.reqs.mu.Lock()
	cancel := g.reqs.cancel[id]
	g.reqs.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// responseWriter sends the response through the respond import: the head
// at the first write, the body at each Flush (so an event stream streams)
// and at the end.
type responseWriter struct {
	id     uint64
	header httpmsg.Header
	wrote  bool
	buf    []byte
	clock  *clock // set when the host answers drain parts (BootConfig.Drain)
}

// flushAt bounds how much body is buffered before it goes out anyway.
const flushAt = 64 << 10

func (w *responseWriter) Header() httpmsg.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	respond(w.id, abi.ResponsePart{Kind: abi.PartHead, Status: code, Header: w.header.Clone()})
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(httpmsg.StatusOK)
	}
	w.buf = append(w.buf, b...)
	if len(w.buf) >= flushAt {
		w.Flush()
	}
	return len(b), nil
}

func (w *responseWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(httpmsg.StatusOK)
	}
	if len(w.buf) > 0 {
		respond(w.id, abi.ResponsePart{Kind: abi.PartBody, Body: w.buf})
		w.buf = nil
	}
}

// Drain waits until the host says the client took everything flushed so
// far (httpmsg.Drainer; docs/abi.md §3, Drain): an event stream's catch-up
// reads its next page of the log only then, so the host holds a page of
// it, never the whole log. The host answers the drain part by firing the
// timer it names. For a host that answers none it returns at once.
func (w *responseWriter) Drain(ctx context.Context) error {
	if w.clock == nil {
		return nil
	}
	w.Flush()
	done := make(chan struct{})
	id := w.clock.register(func() { close(done) })
	respond(w.id, abi.ResponsePart{Kind: abi.PartDrain, Timer: id})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		w.clock.forget(id)
		return ctx.Err()
	}
}

// errAborted is the panic value of Abort (httpmsg.Aborter), known by its
// address: core/api's routes abort with it when they fail after the head
// was sent, and serve recovers it. A pointer, not an error value: it is
// compared only, and costs the guest the least (TestGuestSize).
var errAborted = new(byte)

func (w *responseWriter) IsAbort(p any) bool { return p == errAborted }

func (w *responseWriter) Abort() { panic(errAborted) }

// end ends the response: cleanly, after what is buffered; or, aborted (to a
// host of ABI 1.11 or later), cut short, dropping the buffered rest as
// net/http drops a handler's unflushed body when it aborts.
func (w *responseWriter) end(aborted bool) {
	if !aborted {
		w.Flush()
	}
	respond(w.id, abi.ResponsePart{Kind: abi.PartEnd, Aborted: aborted})
}

func respond(id uint64, part abi.ResponsePart) {
	p, n := bytesPtr(part.Encode())
	hostRespond(id, p, n)
}
