package nethttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
)

func TestHandlerSeesTheRequestAndFlushes(t *testing.T) {
	h := nethttp.Handler(httpmsg.HandlerFunc(func(w httpmsg.ResponseWriter, r *httpmsg.Request) {
		body, _ := io.ReadAll(r.Body)
		_, flushes := w.(httpmsg.Flusher)
		w.Header().Set("x-echo", r.Method+" "+r.URL.Path+" "+r.URL.Query().Get("q")+" "+r.Header.Get("x-in")+" "+string(body))
		w.WriteHeader(httpmsg.StatusAccepted)
		_, _ = io.WriteString(w, map[bool]string{true: "flusher", false: "plain"}[flushes])
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/a%2Fb?q=1", strings.NewReader("hi"))
	req.Header.Set("X-In", "v")
	h.ServeHTTP(rec, req)
	assert.Equal(t, 202, rec.Code)
	assert.Equal(t, "POST /a/b 1 v hi", rec.Header().Get("X-Echo"))
	assert.Equal(t, "flusher", rec.Body.String(), "a recorder flushes, so the adapter's writer does")
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/from" {
			http.Redirect(w, r, "/to", http.StatusFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte(r.Header.Get("X-In")+":"), b...))
	}))
	defer srv.Close()
	c := nethttp.Client(srv.Client())

	req, err := httpmsg.NewRequest(context.Background(), "GET", srv.URL+"/from", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, 302, resp.StatusCode)
	assert.Equal(t, "/to", resp.Header.Get("Location"))

	req, err = httpmsg.NewRequest(context.Background(), "POST", srv.URL+"/to", strings.NewReader("body"))
	require.NoError(t, err)
	req.Header.Set("x-in", "h")
	resp, err = c.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "h:body", string(b))
	assert.Same(t, req, resp.Request)
}

// hangUpServer answers the first request on its first connection, then
// reads the second there and closes it without answering; requests on
// later connections are answered. got lists every request it read, as
// "METHOD body".
type hangUpServer struct {
	ln   net.Listener
	mu   sync.Mutex
	got  []string
	done chan struct{}
}

func newHangUpServer(t *testing.T) *hangUpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &hangUpServer{ln: ln, done: make(chan struct{})}
	var conns []net.Conn
	var wg sync.WaitGroup
	go func() {
		defer close(s.done)
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c, n == 0) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-s.done
		for _, c := range conns {
			_ = c.Close()
		}
		wg.Wait()
	})
	return s
}

func (s *hangUpServer) url() string { return "http://" + s.ln.Addr().String() + "/" }

func (s *hangUpServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// serve answers requests on c; with hangUp, it answers the first and
// closes c once it has read the second.
func (s *hangUpServer) serve(c net.Conn, hangUp bool) {
	defer c.Close()
	r := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		s.mu.Lock()
		s.got = append(s.got, req.Method+" "+string(b))
		s.mu.Unlock()
		if hangUp && n == 1 {
			return
		}
		body := "got " + string(b)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
	}
}

// sendTwice sends two requests made by mk through one client (so the
// second reuses the first's connection) and returns the second's error.
func sendTwice(t *testing.T, srv *hangUpServer, mk func() *httpmsg.Request) error {
	t.Helper()
	c := nethttp.Client(&http.Client{Transport: &http.Transport{}})
	var last error
	for i := range 2 {
		resp, err := c.Do(mk())
		if err == nil {
			_, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		if i == 0 {
			require.NoError(t, err, "the first request is answered")
		}
		last = err
	}
	return last
}

// TestClientNeverResendsARequestNotMarkedReplayable: net/http resends a
// request with an Idempotency-Key (or a GET) when the reused connection it
// went on closes before answering, though the server read it. The adapter
// hands it over so that it does not: the server reads the second request
// once and the call fails, with a body or without, POST or GET.
func TestClientNeverResendsARequestNotMarkedReplayable(t *testing.T) {
	for _, tc := range []struct{ method, body string }{{"POST", "body"}, {"POST", ""}, {"GET", ""}} {
		t.Run(tc.method+"/"+map[bool]string{true: "body", false: "empty"}[tc.body != ""], func(t *testing.T) {
			srv := newHangUpServer(t)
			n := 0
			err := sendTwice(t, srv, func() *httpmsg.Request {
				n++
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				req, err := httpmsg.NewRequest(context.Background(), tc.method, srv.url(), body)
				require.NoError(t, err)
				require.True(t, tc.body == "" || req.GetBody != nil, "NewRequest can reread the body")
				req.Header.Set("Idempotency-Key", fmt.Sprint("k", n))
				return req
			})
			require.Error(t, err, "the second request's connection closed unanswered")
			want := tc.method + " " + tc.body
			assert.Equal(t, []string{want, want}, srv.requests(), "each request read once: the second is not sent again")
		})
	}
}

// TestClientResendsAReplayableRequest: a request marked Replayable (an
// idempotent webhook: the receiver deduplicates by key) is sent again on a
// new connection, as net/http does, and that answer is the call's.
func TestClientResendsAReplayableRequest(t *testing.T) {
	srv := newHangUpServer(t)
	err := sendTwice(t, srv, func() *httpmsg.Request {
		req, err := httpmsg.NewRequest(context.Background(), "POST", srv.url(), strings.NewReader("body"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k")
		req.Replayable = true
		return req
	})
	require.NoError(t, err, "the second request is sent again and answered")
	assert.Equal(t, []string{"POST body", "POST body", "POST body"}, srv.requests(), "the second request read twice")
}

// A request without a body and not marked replayable goes with no body
// (Content-Length: 0 on the wire) whether it has an idempotency key or
// not; a key is moved where net/http's replay check does not look, on a
// copy of the header. A GET gets a stand-in body that is not replayed.
func TestOutgoingBodylessPost(t *testing.T) {
	req, err := httpmsg.NewRequest(context.Background(), "POST", "http://127.0.0.1/", nil)
	require.NoError(t, err)
	hreq, err := nethttp.Outgoing(req)
	require.NoError(t, err)
	assert.Nil(t, hreq.Body, "no body: Content-Length: 0 on the wire")
	assert.Nil(t, hreq.GetBody)

	req.Header.Set("Idempotency-Key", "k")
	req.Header.Set("X-Idempotency-Key", "x")
	hreq, err = nethttp.Outgoing(req)
	require.NoError(t, err)
	assert.Nil(t, hreq.Body, "a keyed request without a body keeps Content-Length: 0")
	assert.Nil(t, hreq.GetBody)
	assert.Equal(t, http.Header{"idempotency-key": {"k"}, "x-idempotency-key": {"x"}}, hreq.Header,
		"the keys are out of net/http's exact-key replay check")
	assert.Equal(t, "k", req.Header.Get("Idempotency-Key"), "the caller's header is left as it was")

	get, err := httpmsg.NewRequest(context.Background(), "GET", "http://127.0.0.1/", nil)
	require.NoError(t, err)
	get.Header.Set("Idempotency-Key", "k")
	hreq, err = nethttp.Outgoing(get)
	require.NoError(t, err)
	assert.NotNil(t, hreq.Body, "net/http replays a GET with no body whatever its header")
	assert.Equal(t, "k", hreq.Header.Get("Idempotency-Key"))
}

// TestClientSendsAKeyedBodylessRequestWithContentLength0: on the wire, a
// POST, PUT or PATCH with an idempotency key and no body goes with
// Content-Length: 0 (not chunked: some servers answer 411) and the server
// gets its key, once, over HTTP/1 and HTTP/2 (which lowercases every
// header name anyway).
func TestClientSendsAKeyedBodylessRequestWithContentLength0(t *testing.T) {
	type seen struct {
		proto int
		te    []string
		cl    int64
		keys  []string
		xkey  []string
	}
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1", true: "HTTP/2"}[h2], func(t *testing.T) {
			got := make(chan seen, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- seen{r.ProtoMajor, r.TransferEncoding, r.ContentLength, r.Header.Values("Idempotency-Key"), r.Header.Values("X-Idempotency-Key")}
			}))
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			c := nethttp.Client(srv.Client())
			for _, method := range []string{"POST", "PUT", "PATCH"} {
				req, err := httpmsg.NewRequest(context.Background(), method, srv.URL+"/", nil)
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", "k-"+method)
				req.Header.Set("X-Idempotency-Key", "x-"+method)
				resp, err := c.Do(req)
				require.NoError(t, err)
				_ = resp.Body.Close()
				s := <-got
				assert.Equal(t, map[bool]int{false: 1, true: 2}[h2], s.proto)
				assert.Empty(t, s.te, method+": not chunked")
				assert.Equal(t, int64(0), s.cl, method+": Content-Length: 0")
				assert.Equal(t, []string{"k-" + method}, s.keys, method+": the key arrives, once")
				assert.Equal(t, []string{"x-" + method}, s.xkey, method)
			}
		})
	}
}

// failSecondWrite is a connection whose second write fails having written
// nothing (its counter is shared by every connection of a transport).
type failSecondWrite struct {
	net.Conn
	writes *atomic.Int32
}

func (c failSecondWrite) Write(p []byte) (int, error) {
	if c.writes.Add(1) == 2 {
		return 0, errors.New("write failed, nothing written")
	}
	return c.Conn.Write(p)
}

// TestClientRetriesARequestNothingOfWhichWasWritten: when writing a
// request on a reused connection fails with nothing of it written,
// net/http sends it on a new connection; a body-less request with an
// idempotency key, not marked replayable, keeps that retry: the second
// call succeeds and the server reads each request once.
func TestClientRetriesARequestNothingOfWhichWasWritten(t *testing.T) {
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		t.Run(method, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				_, _ = io.WriteString(w, "ok")
			}))
			defer srv.Close()
			var writes atomic.Int32
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return failSecondWrite{c, &writes}, nil
			}}
			defer tr.CloseIdleConnections()
			c := nethttp.Client(&http.Client{Transport: tr})
			for i := range 2 {
				req, err := httpmsg.NewRequest(context.Background(), method, srv.URL+"/", nil)
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", fmt.Sprint("k", i))
				resp, err := c.Do(req)
				require.NoError(t, err, "request %d: a write that wrote nothing is retried", i)
				_, _ = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			assert.Equal(t, int32(3), writes.Load(), "the second request's first write failed")
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"k0", "k1"}, keys, "each request read once")
		})
	}
}

// A request built by hand without a body reaches the handler with an empty
// Body, never nil, as httpmsg.Request promises.
func TestRequestWithoutBodyGetsAnEmptyOne(t *testing.T) {
	hr := &http.Request{Method: "GET", URL: &url.URL{Path: "/"}}
	r := nethttp.Request(hr)
	require.NotNil(t, r.Body)
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	assert.Empty(t, b)
	assert.NotNil(t, r.Header)
}

// A request's Host, when set, is the Host sent, whatever the URL's.
func TestOutgoingSendsTheRequestsHost(t *testing.T) {
	req, err := httpmsg.NewRequest(context.Background(), "GET", "http://127.0.0.1:1/", nil)
	require.NoError(t, err)
	req.Host = "api.example.test"
	hreq, err := nethttp.Outgoing(req)
	require.NoError(t, err)
	assert.Equal(t, "api.example.test", hreq.Host)
	assert.Equal(t, "127.0.0.1:1", hreq.URL.Host)
}

// Moving an idempotency key to its lower-case spelling keeps any values
// already under that spelling: none is lost.
func TestOutgoingHidesAKeyWithoutLosingValues(t *testing.T) {
	req, err := httpmsg.NewRequest(context.Background(), "POST", "http://127.0.0.1/", nil)
	require.NoError(t, err)
	req.Header["Idempotency-Key"] = []string{"k"}
	req.Header["idempotency-key"] = []string{"earlier"}
	hreq, err := nethttp.Outgoing(req)
	require.NoError(t, err)
	assert.Equal(t, http.Header{"idempotency-key": {"earlier", "k"}}, hreq.Header)
}

// closeCounter is a body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// A request with no URL is refused, and its body is closed all the same: a
// Doer closes req.Body even on error.
func TestOutgoingWithoutURLClosesTheBody(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader("x")}
	_, err := nethttp.Outgoing(&httpmsg.Request{Method: "POST", Header: httpmsg.Header{}, Body: body})
	require.ErrorContains(t, err, "no URL")
	assert.Equal(t, 1, body.closed)
}
