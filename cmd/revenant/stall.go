package main

import (
	"net/http"
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
