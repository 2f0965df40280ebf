// Package nethttp adapts net/http to httpmsg at the edge of a host that has
// net/http (the local server, tests): Handler serves an httpmsg.Handler as
// an http.Handler, Request converts a received request, and Client sends an
// httpmsg request with an *http.Client.
//
// Portable packages (core/..., tools/web, the wasm guest) never import this
// package: its whole point is that only a host's main program links
// net/http.
//
// # Resends
//
// net/http's Transport sends a request again on a new connection when a
// reused (pooled) one failed before the first byte of the answer, if it
// deems the request replayable: a GET, HEAD, OPTIONS or TRACE, or any
// request with an Idempotency-Key header, whose body it can reread. By
// then the server may have received and acted on the request, so that
// resend can deliver it twice, and revenant's tools send every request
// with an Idempotency-Key. The rule here: a request is handed to net/http
// as replayable only when its sender marked it so (httpmsg.Request's
// Replayable, with GetBody: an idempotent webhook, whose receiver
// deduplicates by key). Every other request is handed over with no GetBody,
// and, when it has no body but net/http would replay it (a GET, HEAD,
// OPTIONS or TRACE, or a request with an idempotency key), with an empty
// body that is not nil, which net/http never replays; it still retries
// one it knows it wrote nothing of. The empty body changes nothing on the
// wire for GET, HEAD or OPTIONS (the transport sees it is empty and sends
// none); a POST, PUT or PATCH with an idempotency key and no body goes as
// an empty chunked body instead of Content-Length: 0 (one without a key
// keeps Content-Length: 0: net/http never replays it).
package nethttp

import (
	"errors"
	"io"
	"net/http"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Handler serves h as an http.Handler. The writer h gets implements
// httpmsg.Flusher when w implements http.Flusher.
func Handler(h httpmsg.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(Writer(w), Request(r))
	})
}

// Request returns r as an httpmsg request, sharing r's URL, header map and
// body (no copies), with r's context.
func Request(r *http.Request) *httpmsg.Request {
	m := &httpmsg.Request{
		Method:        r.Method,
		URL:           r.URL,
		Host:          r.Host,
		Header:        httpmsg.Header(r.Header),
		Body:          r.Body,
		ContentLength: r.ContentLength,
		RemoteAddr:    r.RemoteAddr,
	}
	if m.Header == nil {
		m.Header = httpmsg.Header{}
	}
	if m.Body == nil {
		m.Body = httpmsg.NoBody
	}
	return m.WithContext(r.Context())
}

// Writer returns w as an httpmsg.ResponseWriter whose Header is w's header
// map; it is an httpmsg.Flusher when w is an http.Flusher.
func Writer(w http.ResponseWriter) httpmsg.ResponseWriter {
	if f, ok := w.(http.Flusher); ok {
		return flushWriter{writer{w}, f}
	}
	return writer{w}
}

type writer struct{ w http.ResponseWriter }

func (w writer) Header() httpmsg.Header      { return httpmsg.Header(w.w.Header()) }
func (w writer) WriteHeader(status int)      { w.w.WriteHeader(status) }
func (w writer) Write(b []byte) (int, error) { return w.w.Write(b) }
func (w writer) Unwrap() http.ResponseWriter { return w.w }

type flushWriter struct {
	writer
	f http.Flusher
}

func (w flushWriter) Flush() { w.f.Flush() }

// Client returns c as an httpmsg.Doer that does not follow redirects (a
// copy of c whose CheckRedirect answers the first response, whatever c's
// did). Nil c means http.DefaultClient.
func Client(c *http.Client) httpmsg.Doer {
	if c == nil {
		c = http.DefaultClient
	}
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return client{&cc}
}

type client struct{ c *http.Client }

func (c client) Do(req *httpmsg.Request) (*httpmsg.Response, error) {
	hreq, err := Outgoing(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.c.Do(hreq)
	if err != nil {
		return nil, err
	}
	return &httpmsg.Response{StatusCode: resp.StatusCode, Header: httpmsg.Header(resp.Header), Body: resp.Body, Request: req}, nil
}

// Outgoing returns req as an *http.Request to send (sharing its header map
// and body).
func Outgoing(req *httpmsg.Request) (*http.Request, error) {
	if req.URL == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("send request: no URL")
	}
	replay := req.Replayable && req.GetBody != nil
	body := req.Body
	switch {
	case replay && body == httpmsg.NoBody:
		body = http.NoBody
	case !replay && (body == nil || body == httpmsg.NoBody):
		if safeMethod(req.Method) || idempotencyKeyed(req.Header) {
			// Without a body, net/http replays a GET, HEAD, OPTIONS or TRACE,
			// and any request with an idempotency key (see the package doc).
			body = emptyBody{}
		} else {
			// A POST, PUT, … without a key is never replayed: no body at
			// all keeps its Content-Length: 0 (an emptyBody goes chunked).
			body = nil
		}
	}
	hreq, err := http.NewRequestWithContext(req.Context(), req.Method, req.URL.String(), body)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	if req.Header != nil {
		hreq.Header = http.Header(req.Header)
	}
	if req.Host != "" {
		hreq.Host = req.Host
	}
	if req.ContentLength > 0 || req.ContentLength == 0 && (req.Body == nil || req.Body == httpmsg.NoBody) {
		hreq.ContentLength = req.ContentLength
	}
	// Only a request marked replayable may be sent twice (package doc).
	hreq.GetBody = nil
	if replay {
		hreq.GetBody = req.GetBody
	}
	return hreq, nil
}

// safeMethod: the methods net/http deems replayable.
func safeMethod(m string) bool {
	switch m {
	case "", "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// idempotencyKeyed: the headers that make any method replayable to net/http.
func idempotencyKeyed(h httpmsg.Header) bool {
	return len(h.Values("Idempotency-Key")) > 0 || len(h.Values("X-Idempotency-Key")) > 0
}

// emptyBody is the body of a request without one that must not be
// replayed: net/http replays a request whose body is nil or http.NoBody.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }
