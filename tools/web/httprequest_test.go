package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
)

func httpCall(t *testing.T, args map[string]any) tool.Call {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	return tool.Call{ID: "call-1", Name: web.HTTPRequestName, Arguments: raw, IdempotencyKey: "key-1", SessionID: "s1"}
}

func TestHTTPRequestAllowed(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Other", "not shown")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "hello from "+r.Method)
	})
	h := web.NewHTTPRequest(srv.allowing())

	out, err := h.Execute(context.Background(), httpCall(t, map[string]any{
		"method": "post", "url": srv.URL + "/things?x=1",
		"headers": map[string]string{"X-Test": "yes", "Idempotency-Key": "model-chosen"},
		"body":    `{"a":1}`,
	}))
	require.NoError(t, err)
	require.Equal(t, "HTTP 201 Created\nContent-Type: text/plain; charset=utf-8\n\nhello from POST", out)

	reqs := srv.requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, "/things?x=1", r.URL.RequestURI())
	require.Equal(t, "key-1", r.Header.Get("Idempotency-Key"), "the call's key replaces the model's")
	require.Equal(t, "yes", r.Header.Get("X-Test"))
	require.Equal(t, "revenant", r.Header.Get("User-Agent"))
	require.Equal(t, `{"a":1}`, srv.bodies()[0])

	// GET is the default method, and a non-2xx status is a successful call.
	srv404 := newServer(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	out, err = web.NewHTTPRequest(srv404.allowing()).Execute(context.Background(), httpCall(t, map[string]any{"url": srv404.URL}))
	require.NoError(t, err)
	require.Contains(t, out, "HTTP 404 Not Found\n")
	require.Equal(t, http.MethodGet, srv404.requests()[0].Method)
	require.Equal(t, "key-1", srv404.requests()[0].Header.Get("Idempotency-Key"))
}

// TestHTTPRequestDenied is the acceptance list: loopback, private and
// link-local addresses, and a name resolving to a private address, are all
// refused with a tool error naming the reason, before anything is dialed.
func TestHTTPRequestDenied(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	res := fakeResolver{"internal.test": addrs("10.0.0.5"), "metadata.test": addrs("169.254.169.254")}
	p := dialingThrough(noDial(t)).WithPorts(80, srv.port).WithResolver(res)
	h := web.NewHTTPRequest(p)
	for _, tc := range []struct{ url, want string }{
		{srv.URL + "/", "egress denied: 127.0.0.1 is a loopback address"},
		{"http://10.0.0.1/", "egress denied: 10.0.0.1 is a private address"},
		{"http://169.254.169.254/latest/meta-data/", "egress denied: 169.254.169.254 is a link-local address"},
		{"http://[::1]/", "egress denied: ::1 is a loopback address"},
		{"http://[::ffff:127.0.0.1]:" + strconv.Itoa(srv.port) + "/", "egress denied: 127.0.0.1 is a loopback address"},
		{"http://0.0.0.0/", "egress denied: 0.0.0.0 is an unspecified address"},
		{"http://internal.test/", "egress denied: internal.test resolves to 10.0.0.5, a private address"},
		{"http://metadata.test/computeMetadata/v1/", "egress denied: metadata.test resolves to 169.254.169.254, a link-local address"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := h.Execute(context.Background(), httpCall(t, map[string]any{"url": tc.url}))
			require.ErrorIs(t, err, web.ErrDenied)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "GET "+tc.url+": "), err.Error())
		})
	}
	require.Empty(t, srv.requests())
}

// TestHTTPRequestAllowListed: the same addresses work once their range is
// allowed; what is dialed is the checked address.
func TestHTTPRequestAllowListed(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "inside") })

	out, err := web.NewHTTPRequest(srv.allowing()).Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL}))
	require.NoError(t, err)
	require.Contains(t, out, "inside")

	var dialed []string
	redirectDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	res := fakeResolver{"internal.test": addrs("10.0.0.5")}
	p := dialingThrough(redirectDial).WithResolver(res).
		WithAllowCIDRs(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("169.254.169.254/32"))
	h := web.NewHTTPRequest(p)
	for _, u := range []string{"http://10.0.0.1/", "http://internal.test/", "http://169.254.169.254/"} {
		out, err := h.Execute(context.Background(), httpCall(t, map[string]any{"url": u}))
		require.NoError(t, err, u)
		require.Contains(t, out, "inside")
	}
	require.Equal(t, []string{"10.0.0.1:80", "10.0.0.5:80", "169.254.169.254:80"}, dialed)
}

// TestHTTPRequestRedirects: every redirect is checked again, by URL before
// it is followed and by address when it is dialed; at most five are
// followed.
func TestHTTPRequestRedirects(t *testing.T) {
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "target") })
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/chain/")); err == nil {
			if n == 0 {
				_, _ = io.WriteString(w, "end of chain")
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusFound)
			return
		}
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	res := fakeResolver{"internal.test": addrs("10.0.0.5"), "other.test": addrs("127.0.0.1")}
	p := srv.allowing().WithPorts(80, srv.port, target.port).WithResolver(res)
	h := web.NewHTTPRequest(p)
	get := func(u string) (string, error) {
		return h.Execute(context.Background(), httpCall(t, map[string]any{"url": u}))
	}

	for _, tc := range []struct{ to, want string }{
		{"http://10.0.0.5/", "redirected to http://10.0.0.5/: egress denied: 10.0.0.5 is a private address"},
		{"http://169.254.169.254/latest/meta-data/", "redirected to http://169.254.169.254/latest/meta-data/: egress denied: 169.254.169.254 is a link-local address"},
		{"http://127.0.0.2:" + strconv.Itoa(target.port) + "/", "egress denied: 127.0.0.2 is a loopback address"},
		{"http://internal.test/", "redirected to http://internal.test/: egress denied: internal.test resolves to 10.0.0.5, a private address"},
		{"http://[::1]/", "egress denied: ::1 is a loopback address"},
		{"http://other.test:22/", `redirected to http://other.test:22/: egress denied: port 22 is not allowed`},
		{"ftp://other.test/", `egress denied: scheme "ftp" is not allowed`},
	} {
		t.Run(tc.to, func(t *testing.T) {
			_, err := get(srv.URL + "/?to=" + tc.to)
			require.ErrorIs(t, err, web.ErrDenied)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.Empty(t, target.requests())

	// A redirect the policy allows is followed, and the output says where
	// it ended.
	out, err := get(srv.URL + "/?to=" + target.URL + "/final")
	require.NoError(t, err)
	require.Contains(t, out, "Final-URL: "+target.URL+"/final\n")
	require.Contains(t, out, "target")
	require.Equal(t, "key-1", target.requests()[0].Header.Get("Idempotency-Key"))

	out, err = get(srv.URL + "/chain/5")
	require.NoError(t, err, "five redirects are followed")
	require.Contains(t, out, "end of chain")
	_, err = get(srv.URL + "/chain/6")
	require.ErrorContains(t, err, "too many redirects (more than 5)")
}

// TestHTTPRequestAllowLists: scheme, port and host allow-lists, for the
// first request and for redirects.
func TestHTTPRequestAllowLists(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	port := strconv.Itoa(srv.port)
	res := fakeResolver{"api.example.test": addrs("127.0.0.1"), "evil.test": addrs("127.0.0.1"), "example.test": addrs("127.0.0.1")}
	base := srv.allowing().WithResolver(res)
	run := func(p web.Egress, u string) (string, error) {
		return web.NewHTTPRequest(p).Execute(context.Background(), httpCall(t, map[string]any{"url": u}))
	}

	_, err := run(base.WithSchemes("https"), srv.URL)
	require.ErrorContains(t, err, `egress denied: scheme "http" is not allowed (allowed: https)`)

	_, err = run(srv.allowing().WithPorts(443, 80), srv.URL)
	require.ErrorContains(t, err, "egress denied: port "+port+" is not allowed (allowed: 443, 80)")

	hosts := base.WithHosts("*.example.test")
	out, err := run(hosts, "http://api.example.test:"+port+"/")
	require.NoError(t, err)
	require.Contains(t, out, "ok")
	_, err = run(hosts, "http://evil.test:"+port+"/")
	require.ErrorContains(t, err, "egress denied: host evil.test is not on the host allow-list")
	_, err = run(hosts, "http://example.test:"+port+"/")
	require.ErrorContains(t, err, "egress denied: host example.test is not on the host allow-list")
	_, err = run(hosts, "http://api.example.test:"+port+"/?to=http://evil.test:"+port+"/")
	require.ErrorContains(t, err, "redirected to http://evil.test:"+port+"/: egress denied: host evil.test is not on the host allow-list")
	require.Len(t, srv.requests(), 2, "only the allowed host was reached")
}

func TestHTTPRequestSizeCap(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, strings.Repeat("a", n))
	})
	h := web.NewHTTPRequest(srv.allowing().WithMaxResponseBytes(1000))
	get := func(n int) string {
		out, err := h.Execute(context.Background(), httpCall(t, map[string]any{"url": fmt.Sprintf("%s/?n=%d", srv.URL, n)}))
		require.NoError(t, err)
		return out
	}
	require.Equal(t, "HTTP 200 OK\nContent-Type: text/plain\n\n"+strings.Repeat("a", 1000), get(1000))
	require.Equal(t, "HTTP 200 OK\nContent-Type: text/plain\n\n"+
		"[response truncated: the body is larger than 1000 bytes; the first 1000 are shown]\n"+strings.Repeat("a", 1000), get(50_000))
}

func TestHTTPRequestBodyShapes(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/binary":
			_, _ = w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
		case "/runes":
			_, _ = io.WriteString(w, strings.Repeat("é", 10)) // 20 bytes
		case "/emoji":
			_, _ = io.WriteString(w, strings.Repeat("😀", 5)) // 4 bytes each
		case "/euro":
			_, _ = io.WriteString(w, "aa€€€") // the cap cuts the second € after two of its three bytes
		case "/bigbinary":
			_, _ = w.Write(bytes.Repeat([]byte{0xff}, 20))
		}
	})
	h := web.NewHTTPRequest(srv.allowing().WithMaxResponseBytes(7))
	out, err := h.Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL + "/binary"}))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out, "\n\n[binary body of 4 bytes not shown]"), out)
	out, err = h.Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL + "/runes"}))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out, "\n\n[response truncated: the body is larger than 7 bytes; the first 6 are shown]\nééé"), out)
	out, err = h.Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL + "/emoji"}))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out, "\n\n[response truncated: the body is larger than 7 bytes; the first 4 are shown]\n😀"), "a rune cut three bytes in is dropped whole: %s", out)
	out, err = h.Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL + "/euro"}))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out, "\n\n[response truncated: the body is larger than 7 bytes; the first 5 are shown]\naa€"), out)
	out, err = h.Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL + "/bigbinary"}))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out, "\n\n[binary body larger than 7 bytes not shown]"), out)
	out, err = h.Execute(context.Background(), httpCall(t, map[string]any{"method": "HEAD", "url": srv.URL + "/runes"}))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "HTTP 200 OK\n"), out)
}

// TestHTTPRequestBodyCutShort: a body that ends before its length (the
// connection dropped mid-answer) is an error, not a short answer passed off
// as the whole.
func TestHTTPRequestBodyCutShort(t *testing.T) {
	rt := &fakeTransport{respond: func(req *httpmsg.Request) (*httpmsg.Response, error) {
		body := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(io.ErrUnexpectedEOF))
		return &httpmsg.Response{StatusCode: 200, Header: httpmsg.Header{}, Body: io.NopCloser(body), Request: req}, nil
	}}
	_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/"}))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.EqualError(t, err, "GET https://api.example.com/: read body: unexpected EOF")
}

// TestHTTPRequestTimeout: the server holds the request until the client
// gives up; the policy's timeout ends it with an error saying so.
func TestHTTPRequestTimeout(t *testing.T) {
	hold := func(arrived chan<- struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if arrived != nil {
				close(arrived)
			}
			<-r.Context().Done()
		}
	}
	srv := newServer(t, hold(nil))
	h := web.NewHTTPRequest(srv.allowing().WithTimeout(50 * time.Millisecond))
	require.Equal(t, 50*time.Millisecond+time.Second, h.Limits().Timeout, "the runner's wall limit leaves the tool's own error room")

	_, err := h.Execute(context.Background(), httpCall(t, map[string]any{"url": srv.URL}))
	require.ErrorIs(t, err, web.ErrTimeout)
	require.EqualError(t, err, "GET "+srv.URL+": request timed out after 50ms")

	// The caller's context (the runner's) ends a request too.
	arrived := make(chan struct{})
	srv2 := newServer(t, hold(arrived))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err = web.NewHTTPRequest(srv2.allowing()).Execute(ctx, httpCall(t, map[string]any{"url": srv2.URL}))
	require.ErrorIs(t, err, context.Canceled)

	// The caller's deadline is the caller's: not reported as the policy's
	// timeout.
	srv3 := newServer(t, hold(nil))
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	_, err = web.NewHTTPRequest(srv3.allowing()).Execute(dctx, httpCall(t, map[string]any{"url": srv3.URL}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, web.ErrTimeout)
}

// A password in a URL (the model's, or a redirect's) is never repeated
// back: not in the output's Final-URL, not in an error.
func TestHTTPRequestRedactsPasswords(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "http://u:hop-secret@"+r.Host+"/b", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://u:hop-secret@elsewhere.test/", http.StatusFound)
		}
	})
	host := strings.TrimPrefix(srv.URL, "http://")
	h := web.NewHTTPRequest(srv.allowing())
	out, err := h.Execute(context.Background(), httpCall(t, map[string]any{"url": "http://u:first-secret@" + host + "/a"}))
	require.NoError(t, err)
	require.Contains(t, out, "Final-URL: http://u:xxxxx@"+host+"/b")
	require.NotContains(t, out, "secret")

	_, err = h.Execute(context.Background(), httpCall(t, map[string]any{"url": "http://u:first-secret@" + host + "/away"}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret")
	require.Contains(t, err.Error(), "GET http://u:xxxxx@"+host+"/away: redirected to http://u:xxxxx@elsewhere.test/")
}

func TestHTTPRequestContract(t *testing.T) {
	h := web.NewHTTPRequest(dialing())
	spec := h.Spec()
	require.Equal(t, "http_request", spec.Name)
	require.True(t, json.Valid(spec.Schema))
	require.False(t, h.Idempotent(), "a crash while a request is in flight is an unknown outcome, never a re-send")
	require.Equal(t, 31*time.Second, h.Limits().Timeout)

	res, err := h.Resources(json.RawMessage(`{"url":"https://API.Example.com:8443/x"}`))
	require.NoError(t, err)
	require.Equal(t, []string{"http:api.example.com"}, res)

	for args, want := range map[string]string{
		`{"url":"https://example.com","method":"TRACE"}`:                       `invalid arguments: method "TRACE" is not one of GET, HEAD, POST, PUT, PATCH, DELETE`,
		`{"url":"/relative"}`:                                                  `invalid arguments: url "/relative" is not an absolute http or https URL`,
		`{"url":"https://example.com","verb":"GET"}`:                           `invalid arguments: unknown field "verb"`,
		`{"url":"https://example.com","headers":{"host":"x"}}`:                 `invalid arguments: header host cannot be set`,
		`{"url":"https://example.com","method":"HEAD","body":"x"}`:             `invalid arguments: a HEAD request has no body`,
		`{"url":"https://example.com","headers":{"X-A":"a\r\nX-Injected: 1"}}`: `invalid arguments: the value of header X-A holds a control character`,
		`{"url":"https://example.com","headers":{"X-A":"a\u0000b"}}`:           `invalid arguments: the value of header X-A holds a control character`,
		`{"url":"https://example.com","headers":{"X-A\r\nX-B":"v"}}`:           `invalid arguments: header name "X-A\r\nX-B" is not a valid HTTP field name`,
		`{"url":"https://example.com","headers":{"X A":"v"}}`:                  `invalid arguments: header name "X A" is not a valid HTTP field name`,
		`{"url":"https://example.com\r\nX-B: 1"}`:                              `invalid arguments: url`,
		`[1]`: `invalid arguments: cannot unmarshal array into Go value of type struct`,
	} {
		_, err := h.Execute(context.Background(), tool.Call{Arguments: json.RawMessage(args)})
		require.ErrorContains(t, err, want, args)
		_, err = h.Resources(json.RawMessage(args))
		require.Error(t, err, args)
	}
}
