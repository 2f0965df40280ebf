package httpmsg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Request is an HTTP request, received by a Handler or sent by a Doer.
type Request struct {
	Method string
	// URL is the request's target. For a received request only its path
	// and query are meaningful (Path unescaped, RawPath the escaped form
	// when it differs, as url.URL keeps them).
	URL *url.URL
	// Host is the Host header's value (received) or the host to send to
	// (sent; empty means URL.Host).
	Host   string
	Header Header
	// Body is the request's body; never nil for a received request (an
	// empty reader when there is none). A Doer closes it.
	Body io.ReadCloser
	// ContentLength is the body's length when known, -1 when not; 0 with
	// a nil Body means no body.
	ContentLength int64
	// RemoteAddr is the peer's address when the host knows it.
	RemoteAddr string
	// GetBody, when set, returns a fresh copy of the body. NewRequest sets
	// it for the body types it sizes.
	GetBody func() (io.ReadCloser, error)
	// Replayable says the receiver deduplicates the request (an
	// idempotent webhook, by its key), so a client may send it again, with
	// GetBody, after a connection failed under it when it cannot know
	// whether the request arrived (net/http does, for a reused
	// connection). Unset, a client never sends it twice.
	Replayable bool

	ctx        context.Context
	pathValues map[string]string
}

// NewRequest returns a request for method and rawURL carrying body (nil
// for none) under ctx; a *bytes.Reader, *bytes.Buffer or *strings.Reader
// body sets ContentLength.
func NewRequest(ctx context.Context, method, rawURL string, body io.Reader) (*Request, error) {
	if ctx == nil {
		return nil, fmt.Errorf("new request: nil context")
	}
	if method == "" {
		method = MethodGet
	}
	if !validMethod(method) {
		return nil, fmt.Errorf("new request: invalid method %q", method)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("new request: %w", err)
	}
	r := &Request{Method: method, URL: u, Host: u.Host, Header: Header{}, ctx: ctx}
	switch b := body.(type) {
	case nil:
		r.Body = NoBody
	case *bytes.Reader:
		r.ContentLength = int64(b.Len())
		snapshot := *b
		r.GetBody = func() (io.ReadCloser, error) { c := snapshot; return io.NopCloser(&c), nil }
	case *bytes.Buffer:
		r.ContentLength = int64(b.Len())
		buf := b.Bytes()
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	case *strings.Reader:
		r.ContentLength = int64(b.Len())
		snapshot := *b
		r.GetBody = func() (io.ReadCloser, error) { c := snapshot; return io.NopCloser(&c), nil }
	default:
		r.ContentLength = -1
	}
	if body != nil {
		rc, ok := body.(io.ReadCloser)
		if !ok {
			rc = io.NopCloser(body)
		}
		r.Body = rc
	}
	return r, nil
}

// validMethod reports whether m is a token (RFC 9110 method).
func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !isTokenByte(m[i]) {
			return false
		}
	}
	return m != ""
}

// Context returns the request's context: cancelled when the client goes
// away (received) or bounding the exchange (sent). Never nil.
func (r *Request) Context() context.Context {
	if r.ctx != nil {
		return r.ctx
	}
	return context.Background()
}

// WithContext returns a shallow copy of r with ctx as its context.
func (r *Request) WithContext(ctx context.Context) *Request {
	if ctx == nil {
		panic("httpmsg: nil context")
	}
	c := *r
	c.ctx = ctx
	return &c
}

// PathValue returns the value a router set for name ({name} in its
// pattern), or "".
func (r *Request) PathValue(name string) string { return r.pathValues[name] }

// SetPathValue sets name's path value (routers call it).
func (r *Request) SetPathValue(name, value string) {
	if r.pathValues == nil {
		r.pathValues = map[string]string{}
	}
	r.pathValues[name] = value
}

// NoBody is an empty body.
var NoBody io.ReadCloser = noBody{}

type noBody struct{}

func (noBody) Read([]byte) (int, error) { return 0, io.EOF }
func (noBody) Close() error             { return nil }
