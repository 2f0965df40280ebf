package httpmsg

import (
	"context"
	"io"
)

// Response is an HTTP response a Doer received.
type Response struct {
	StatusCode int
	Header     Header
	// Body is the response's body, never nil; the caller closes it.
	Body io.ReadCloser
	// Request is the request this response answers.
	Request *Request
}

// Doer sends one request and returns the response as it came: it does not
// follow redirects (a caller that wants them follows Location itself, so
// every hop passes its own checks). It closes req.Body, even on error. An
// error means no response (a transport failure or the context's end); a
// 4xx or 5xx is a Response, not an error.
type Doer interface {
	Do(req *Request) (*Response, error)
}

// DoerFunc adapts a function to Doer.
type DoerFunc func(*Request) (*Response, error)

// Do calls f(req).
func (f DoerFunc) Do(req *Request) (*Response, error) { return f(req) }

// ResponseWriter is what a Handler writes its answer to, as net/http's:
// set Header before WriteHeader; Write without WriteHeader means 200.
type ResponseWriter interface {
	Header() Header
	WriteHeader(status int)
	Write(b []byte) (int, error)
}

// Flusher is implemented by a ResponseWriter that can send what was
// written so far before the handler returns (an event stream needs it).
type Flusher interface {
	Flush()
}

// Aborter is implemented by a ResponseWriter whose server has a panic
// value by which a handler aborts its response (net/http's
// http.ErrAbortHandler: the server drops the exchange, answering nothing
// more and logging no panic). A handler that answers panics itself
// (core/api's routes answer 500) passes such a panic on instead: it was
// meant for the server, and a 500 written after a part of the answer
// would read as more of it.
//
// Abort panics with that value: a handler whose answer is begun and
// cannot go on (a panic after the head was sent) ends it that way, so the
// client sees a response cut short, not one that reads as complete.
type Aborter interface {
	IsAbort(panicValue any) bool
	Abort()
}

// Drainer is implemented by a ResponseWriter whose Flush only starts
// sending what was written (a Durable Object's stream: its chunks leave
// when the isolate's event loop runs, after the handler blocks). Drain
// waits until the client took everything flushed, so that a handler that
// writes much in pages (an event stream's catch-up) holds one page at a
// time rather than all of it. It fails once the client went away or
// stopped reading, or when ctx ends. A writer whose Flush returns once
// the bytes are sent on (net/http's) needs none.
type Drainer interface {
	Drain(ctx context.Context) error
}

// Handler answers a request.
type Handler interface {
	ServeHTTP(w ResponseWriter, r *Request)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ResponseWriter, *Request)

// ServeHTTP calls f(w, r).
func (f HandlerFunc) ServeHTTP(w ResponseWriter, r *Request) { f(w, r) }
