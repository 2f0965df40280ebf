package main

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// writeStall is how long one write to a client may wait for the client to
// take bytes. An event stream writes at least a heartbeat every 15 s, so a
// client that reads nothing for this long (its buffers full) has gone;
// without a deadline its handler would wait in that write for ever, past
// the tree's stream limit, holding its page of events.
const writeStall = 30 * time.Second

// stallLimit gives every write and flush of h's responses a deadline of d
// from when it starts (http.ResponseController), so a response a client
// stopped reading ends with a write error instead of hanging.
func stallLimit(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}, r)
	})
}

type stallWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *stallWriter) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *stallWriter) Write(b []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(b)
}

// Flush keeps the writer an http.Flusher: event streams flush each event.
func (w *stallWriter) Flush() {
	w.arm()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// closeUnread lets h answer a request without reading all of its body (an
// unknown session's 404, an interrupt, which ignores its body, a 401)
// even when the client never sends the rest: by default net/http first
// reads what is left of a small unread body, so the answer would wait for
// the read timeout. An answer written before the body reached its end
// says "Connection: close" instead, which net/http takes as leave the body
// alone: the answer goes out at once and the connection is not reused (the
// next bytes on it may be the rest of this body). That holds for the
// implicit 200 of a handler that wrote nothing too. A body read to its end
// keeps the connection alive as before.
//
// Once the handler returns with the body unended, net/http still reads
// what is left of a small body (up to 256 KiB) before it closes the
// connection, so a client that declared more than it sends held the
// connection until the read timeout (60 s). The connection cannot be
// reused, so its reads get unreadGrace to finish: a client still sending
// its body ends it and the connection closes cleanly; one that sends no
// more is cut off then, not at the read timeout.
//
// Full duplex (http.ResponseController.EnableFullDuplex) would also let the
// answer go first, but it keeps the connection for the next request while
// the body may still be being read, and net/http panics on that
// ("invalid concurrent Body.Read call").
func closeUnread(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		body := &endWatcher{ReadCloser: r.Body}
		r = r.WithContext(r.Context()) // a handler must not change the request it was given
		r.Body = body
		uw := &unreadWriter{ResponseWriter: w, body: body}
		h.ServeHTTP(uw, r)
		// A handler that wrote nothing is answered by net/http's implicit
		// 200 after it returns, which would first read the rest of the
		// body: the header map still counts for that answer.
		uw.header()
		if !body.ended.Load() {
			// The answer says Connection: close (header, above). Errors:
			// a hijacked or already closed connection has no deadline to set.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(unreadGrace))
		}
	})
}

// unreadGrace is how long a connection whose request was answered before
// its body ended may go on reading that body before it closes: long enough
// for a client already sending the rest to finish, so the close does not
// reset the connection under the answer (net/http waits as long, 500 ms,
// before closing after a body over its limit).
const unreadGrace = 500 * time.Millisecond

// endWatcher is a request body that records whether it was read to its end.
type endWatcher struct {
	io.ReadCloser
	ended atomic.Bool
}

func (b *endWatcher) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended.Store(true)
	}
	return n, err
}

// unreadWriter marks its response "Connection: close" when the header goes
// out before the body ended.
type unreadWriter struct {
	http.ResponseWriter
	body  *endWatcher
	wrote bool
}

func (w *unreadWriter) header() {
	if w.wrote {
		return
	}
	w.wrote = true
	if !w.body.ended.Load() {
		w.ResponseWriter.Header().Set("Connection", "close")
	}
}

func (w *unreadWriter) WriteHeader(code int) {
	if code >= 200 { // an informational header is not the answer
		w.header()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *unreadWriter) Write(b []byte) (int, error) {
	w.header()
	return w.ResponseWriter.Write(b)
}

// Flush keeps the writer an http.Flusher: a flush sends the header too.
func (w *unreadWriter) Flush() {
	w.header()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *unreadWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
