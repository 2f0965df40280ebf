package nethttp

import (
	"errors"
	"io"
	"net/http"
	"strings"

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
// map; it is an httpmsg.Flusher when w is an http.Flusher, and always an
// httpmsg.Aborter whose abort is http.ErrAbortHandler.
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

// IsAbort: a handler's panic with http.ErrAbortHandler is net/http's to
// drop the response silently.
func (w writer) IsAbort(p any) bool { return p == http.ErrAbortHandler }

// Abort panics with http.ErrAbortHandler: net/http drops the connection
// (an HTTP/2 stream is reset), and the response is cut short.
func (w writer) Abort() { panic(http.ErrAbortHandler) }

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

// Outgoing returns req as an *http.Request to send (sharing its body, and
// its header map unless it moves an idempotency key: see the package doc).
func Outgoing(req *httpmsg.Request) (*http.Request, error) {
	if req.URL == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("send request: no URL")
	}
	replay := req.Replayable && req.GetBody != nil
	body := req.Body
	bodyless := body == nil || body == httpmsg.NoBody
	header := http.Header(req.Header)
	switch {
	case replay && body == httpmsg.NoBody:
		body = http.NoBody
	case !replay && bodyless && safeMethod(req.Method):
		// net/http replays a GET, HEAD, OPTIONS or TRACE without a body
		// (see the package doc).
		body = emptyBody{}
	case !replay && bodyless:
		// No body at all keeps Content-Length: 0 and the retry of a
		// request none of which was written; hiding the key keeps net/http
		// from resending it after it was written (see the package doc).
		body = nil
		header = hideIdempotencyKey(header)
	}
	hreq, err := http.NewRequestWithContext(req.Context(), req.Method, req.URL.String(), body)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	if header != nil {
		hreq.Header = header
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

// replayKeys are the header map keys that make any method replayable to
// net/http's HTTP/1 transport: it looks them up exactly as spelled here.
var replayKeys = [...]string{"Idempotency-Key", "X-Idempotency-Key"}

// hideIdempotencyKey returns h, or when h has one of replayKeys, a copy of
// h with each moved to its lower-case spelling (appended to any values
// already there). The copy leaves the caller's header map as it was.
func hideIdempotencyKey(h http.Header) http.Header {
	out, copied := h, false
	for _, k := range replayKeys {
		vs, ok := h[k]
		if !ok {
			continue
		}
		if !copied {
			out, copied = h.Clone(), true
		}
		lower := strings.ToLower(k)
		delete(out, k)
		out[lower] = append(out[lower], vs...)
	}
	return out
}

// emptyBody is the body of a request without one that must not be
// replayed: net/http replays a request whose body is nil or http.NoBody.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }
