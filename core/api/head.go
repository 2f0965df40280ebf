package api

import "github.com/revenantrt/revenant/core/httpmsg"

// headWriter is a route's ResponseWriter that records whether the
// response's head was sent (a WriteHeader, or a Write that implies one),
// so that a route that panics is answered 500 only while nothing was
// sent: once the head is out, a second header and a JSON error appended
// to the body would read as more of the answer begun (handle aborts it
// instead). trackHead keeps the writer's Flusher and Drainer, which the
// event stream asks for.
type headWriter struct {
	httpmsg.ResponseWriter
	sent bool
}

func (w *headWriter) WriteHeader(status int) {
	w.sent = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *headWriter) Write(b []byte) (int, error) {
	w.sent = true
	return w.ResponseWriter.Write(b)
}

type headFlusher struct {
	*headWriter
	httpmsg.Flusher
}

type headFlushDrainer struct {
	*headWriter
	httpmsg.Flusher
	httpmsg.Drainer
}

type headDrainer struct {
	*headWriter
	httpmsg.Drainer
}

// trackHead returns w as a writer whose head is recorded in the
// headWriter returned, with w's Flusher and Drainer if it has them.
func trackHead(w httpmsg.ResponseWriter) (httpmsg.ResponseWriter, *headWriter) {
	hw := &headWriter{ResponseWriter: w}
	f, flushes := w.(httpmsg.Flusher)
	d, drains := w.(httpmsg.Drainer)
	switch {
	case flushes && drains:
		return headFlushDrainer{hw, f, d}, hw
	case flushes:
		return headFlusher{hw, f}, hw
	case drains:
		return headDrainer{hw, d}, hw
	}
	return hw, hw
}
