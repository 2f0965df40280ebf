package api

import (
	"context"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// headWriter is a route's ResponseWriter that records whether the
// response's head was sent (a WriteHeader, or a Write that implies one),
// so that a route that panics is answered 500 only while nothing was
// sent: once the head is out, a second header and a JSON error appended
// to the body would read as more of the answer begun (handle aborts it
// instead).
//
// It keeps the writer's Flush and Drain, which the event stream asks for
// (streamFlusher). It is one type for every writer, a Flusher and a
// Drainer whatever the writer is, not a type per combination: each costs
// the guest bytes, and its size is watched (wasm/runtime's TestGuestSize).
type headWriter struct {
	httpmsg.ResponseWriter
	flusher httpmsg.Flusher // nil: the writer cannot flush
	drainer httpmsg.Drainer // nil: the writer needs no drain
	sent    bool
	// unmarshalled is why the value writeJSON was given did not marshal
	// (it answered 500 instead): handle logs it.
	unmarshalled error
}

func newHeadWriter(w httpmsg.ResponseWriter) *headWriter {
	hw := &headWriter{ResponseWriter: w}
	hw.flusher, _ = w.(httpmsg.Flusher)
	hw.drainer, _ = w.(httpmsg.Drainer)
	return hw
}

func (w *headWriter) WriteHeader(status int) {
	w.sent = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *headWriter) Write(b []byte) (int, error) {
	w.sent = true
	return w.ResponseWriter.Write(b)
}

// Flush flushes the writer; streamFlusher refuses a stream first to a
// writer that cannot.
func (w *headWriter) Flush() {
	if w.flusher != nil {
		w.sent = true // a flush sends the head, 200 if none was written
		w.flusher.Flush()
	}
}

// Drain is the writer's, or nil at once for a writer that needs none
// (httpmsg.Drainer: net/http's).
func (w *headWriter) Drain(ctx context.Context) error {
	if w.drainer == nil {
		return nil
	}
	return w.drainer.Drain(ctx)
}

// streamFlusher is w's Flusher if w can flush: a headWriter's only if the
// writer under it can.
func streamFlusher(w httpmsg.ResponseWriter) (httpmsg.Flusher, bool) {
	if hw, ok := w.(*headWriter); ok && hw.flusher == nil {
		return nil, false
	}
	f, ok := w.(httpmsg.Flusher)
	return f, ok
}
