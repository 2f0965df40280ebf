package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
)

// fakeTransport stands in for a platform's fetch: it records each request
// (and its body) and answers with respond.
type fakeTransport struct {
	respond func(*httpmsg.Request) (*httpmsg.Response, error)

	mu     sync.Mutex
	reqs   []*httpmsg.Request
	bodies []string
}

func (f *fakeTransport) Do(req *httpmsg.Request) (*httpmsg.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	return f.respond(req)
}

func (f *fakeTransport) urls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.reqs))
	for i, r := range f.reqs {
		out[i] = r.URL.String()
	}
	return out
}

func answer(status int, header httpmsg.Header, body string) func(*httpmsg.Request) (*httpmsg.Response, error) {
	return func(req *httpmsg.Request) (*httpmsg.Response, error) {
		return &httpmsg.Response{StatusCode: status, Header: header.Clone(),
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
}

// noLocalAddrs makes the own-address rule deterministic: this host has none.
func noLocalAddrs() ([]netip.Addr, error) { return nil, nil }

func fetchPolicy(rt httpmsg.Doer) web.Egress {
	return web.NewEgress().WithTransport(rt).WithLocalAddrs(noLocalAddrs)
}

func fetchCall(t *testing.T, args map[string]any) tool.Call {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	return tool.Call{ID: "call-1", Name: web.HTTPRequestName, Arguments: raw, IdempotencyKey: "key-1", SessionID: "s1"}
}

// TestTransportRefusedNeverSent: with an injected transport, every URL the
// rules refuse is refused before the transport sees it.
func TestTransportRefusedNeverSent(t *testing.T) {
	rt := &fakeTransport{respond: answer(200, nil, "ok")}
	h := web.NewHTTPRequest(fetchPolicy(rt).WithHosts("*.example.com", "localhost", "foo.localhost", "127.1", "0x7f.1", "2130706433", "xn--fa-hia.example.com", "１２７.０.０.１", "127.0.0.1", "::1", "169.254.169.254"))
	for _, tc := range []struct{ url, msg string }{
		{"http://127.0.0.1/", "127.0.0.1 is a loopback address"},
		{"http://[::1]/", "::1 is a loopback address"},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"},
		{"http://localhost/", "localhost is a loopback name"},
		{"http://LOCALHOST./", "localhost is a loopback name"},
		{"http://foo.localhost/", "foo.localhost is a loopback name"},
		{"http://127.1/", "host 127.1 would be read as an IPv4 address in a non-standard form"},
		{"http://0x7f.1/", "host 0x7f.1 would be read as an IPv4 address in a non-standard form"},
		{"http://2130706433/", "host 2130706433 would be read as an IPv4 address in a non-standard form"},
		{"http://１２７.０.０.１/", `host "１２７.０.０.１" is not an ASCII name`},
		{"http://a%25.example.com/", `host "a%.example.com" is not an ASCII name`},
		{"ftp://api.example.com/", `scheme "ftp" is not allowed`},
		{"https://api.example.com:8443/", "port 8443 is not allowed"},
		{"https://example.org/", "host example.org is not on the host allow-list"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := h.Execute(context.Background(), fetchCall(t, map[string]any{"url": tc.url}))
			require.ErrorIs(t, err, web.ErrDenied)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	assert.Empty(t, rt.urls(), "no refused request reached the transport")

	// The client alone checks the request too, so a caller that skips
	// CheckURL is still refused.
	_, err := get(t, web.Client(fetchPolicy(rt)), "http://localhost/")
	require.ErrorIs(t, err, web.ErrDenied)
	assert.Empty(t, rt.urls())
}

// TestTransportNumericLabels: only a last label a WHATWG parser reads as
// a number makes a name an address; other digits are a name.
func TestTransportNumericLabels(t *testing.T) {
	checkRefused(t, fetchPolicy(&fakeTransport{respond: answer(200, nil, "ok")}), map[string]bool{
		"http://1.2.3.4.5/":         true,
		"http://0x/":                true,
		"http://a.0XFF/":            true,
		"http://0177.0.0.1/":        true,
		"http://8.8.8.8/":           false, // a standard literal: its address is checked (public)
		"http://a1.example.com/":    false,
		"http://api.example.com1x/": false,
		"http://x.0xg/":             false,
		"http://xn--fa-hia.de/":     false,
	})
}

// checkRefused checks each URL against p: refused (ErrDenied) or allowed.
func checkRefused(t *testing.T, p web.Egress, urls map[string]bool) {
	t.Helper()
	for raw, refused := range urls {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		if refused {
			assert.ErrorIs(t, p.CheckURL(u), web.ErrDenied, raw)
		} else {
			assert.NoError(t, p.CheckURL(u), raw)
		}
	}
}

// TestTransportLoopbackNameAllowed: a loopback name passes once the
// policy allows both addresses it stands for.
func TestTransportLoopbackNameAllowed(t *testing.T) {
	rt := &fakeTransport{respond: answer(200, nil, "ok")}
	u, err := url.Parse("http://localhost/")
	require.NoError(t, err)
	v4 := netip.MustParsePrefix("127.0.0.0/8")
	require.ErrorIs(t, fetchPolicy(rt).WithAllowCIDRs(v4).CheckURL(u), web.ErrDenied, "::1 is not allowed")
	require.NoError(t, fetchPolicy(rt).WithAllowCIDRs(v4, netip.MustParsePrefix("::1/128")).CheckURL(u))

	// Without a transport the name is resolved and each address checked
	// when dialed: CheckURL says nothing about a name (unchanged).
	require.NoError(t, web.NewEgress().CheckURL(u))
}

// TestTransportSendsWithHeaders: an allowed request goes to the transport
// with the call's Idempotency-Key (replacing the model's), the method and
// the body; the answer is the tool's output.
func TestTransportSendsWithHeaders(t *testing.T) {
	rt := &fakeTransport{respond: answer(201, httpmsg.Header{"Content-Type": {"text/plain"}}, "created")}
	h := web.NewHTTPRequest(fetchPolicy(rt))
	out, err := h.Execute(context.Background(), fetchCall(t, map[string]any{
		"method": "POST", "url": "https://api.example.com/items", "body": `{"a":1}`,
		"headers": map[string]string{"Idempotency-Key": "the-model's", "X-Trace": "t"}}))
	require.NoError(t, err)
	assert.Equal(t, "HTTP 201 Created\nContent-Type: text/plain\n\ncreated", out)
	require.Equal(t, []string{"https://api.example.com/items"}, rt.urls())
	req := rt.reqs[0]
	assert.Equal(t, httpmsg.MethodPost, req.Method)
	assert.Equal(t, "key-1", req.Header.Get("Idempotency-Key"))
	assert.Equal(t, "t", req.Header.Get("X-Trace"))
	assert.Equal(t, "revenant", req.Header.Get("User-Agent"))
	assert.Equal(t, `{"a":1}`, rt.bodies[0])

	// The model's own User-Agent is sent as it is; a call without a key
	// sends no Idempotency-Key at all, not the model's.
	call := fetchCall(t, map[string]any{"url": "https://api.example.com/items",
		"headers": map[string]string{"User-Agent": "my-agent/1.0", "Idempotency-Key": "the-model's"}})
	call.IdempotencyKey = ""
	_, err = h.Execute(context.Background(), call)
	require.NoError(t, err)
	require.Len(t, rt.reqs, 2)
	assert.Equal(t, "my-agent/1.0", rt.reqs[1].Header.Get("User-Agent"))
	assert.Empty(t, rt.reqs[1].Header.Values("Idempotency-Key"), "a key the model made up is not a key the runner deduplicates by")
}

// TestTransportNameCharacters: a name of ASCII letters, digits, '-', '_'
// and '.' is handed to the platform to resolve ('_' as in "_acme-challenge"
// or a service name); anything else is refused before it is sent.
func TestTransportNameCharacters(t *testing.T) {
	checkRefused(t, fetchPolicy(&fakeTransport{respond: answer(200, nil, "ok")}), map[string]bool{
		"http://_acme-challenge.example.com/": false,
		"http://my_service.example.com/":      false,
		"http://xn--bcher-kva.example/":       false,
		"http://bücher.example/":              true,
		"http://ｌｏｃａｌｈｏｓｔ/":                   true,
	})
}

// TestTransportRedirectsRechecked: a redirect to a refused place is not
// followed (the transport saw the first request only); an allowed one is,
// and the output names where it led.
func TestTransportRedirectsRechecked(t *testing.T) {
	for _, target := range []string{"http://127.0.0.1/admin", "http://localhost:80/", "http://0x7f000001/", "ftp://api.example.com/"} {
		rt := &fakeTransport{respond: answer(302, httpmsg.Header{"Location": {target}}, "")}
		_, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/go"}))
		require.ErrorIs(t, err, web.ErrDenied, target)
		assert.Contains(t, err.Error(), "redirected to")
		assert.Equal(t, []string{"https://api.example.com/go"}, rt.urls(), target)
	}

	rt := &fakeTransport{}
	rt.respond = func(req *httpmsg.Request) (*httpmsg.Response, error) {
		if req.URL.Path == "/go" {
			return answer(302, httpmsg.Header{"Location": {"https://cdn.example.com/there"}}, "")(req)
		}
		return answer(200, nil, "arrived")(req)
	}
	out, err := web.NewHTTPRequest(fetchPolicy(rt)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/go"}))
	require.NoError(t, err)
	assert.Equal(t, "HTTP 200 OK\nFinal-URL: https://cdn.example.com/there\n\narrived", out)
	assert.Equal(t, []string{"https://api.example.com/go", "https://cdn.example.com/there"}, rt.urls())
}

// TestTransportCapsAndTimeout: the body cap and the timeout hold over the
// injected transport.
func TestTransportCapsAndTimeout(t *testing.T) {
	rt := &fakeTransport{respond: answer(200, nil, strings.Repeat("x", 100))}
	out, err := web.NewHTTPRequest(fetchPolicy(rt).WithMaxResponseBytes(10)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/"}))
	require.NoError(t, err)
	assert.Contains(t, out, "\n\n[response truncated: the body is larger than 10 bytes; the first 10 are shown]\nxxxxxxxxxx")

	hang := &fakeTransport{respond: func(req *httpmsg.Request) (*httpmsg.Response, error) {
		<-req.Context().Done() // a transport honours the request's context
		return nil, req.Context().Err()
	}}
	start := time.Now()
	_, err = web.NewHTTPRequest(fetchPolicy(hang).WithTimeout(50*time.Millisecond)).Execute(context.Background(), fetchCall(t, map[string]any{"url": "https://api.example.com/"}))
	require.ErrorIs(t, err, web.ErrTimeout)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestTransportWebhook: a webhook over the transport reaches its
// configured destination (trusted, even on loopback) with the Standard
// Webhooks headers and Idempotency-Key, verifiably signed; it follows no
// redirect; and its trust does not open the address to http_request.
func TestTransportWebhook(t *testing.T) {
	rt := &fakeTransport{respond: answer(200, nil, `{"ok":true}`)}
	policy := fetchPolicy(rt)
	secret := "a-webhook-secret-of-32-bytes-xyz"
	hook, err := web.NewWebhook(web.WebhookSpec{Name: "ledger", Description: "d", URL: "http://127.0.0.1:9999/hook", Secret: web.NewSecret(secret)}, policy)
	require.NoError(t, err)
	call := tool.Call{ID: "call-7", Name: "ledger", Arguments: json.RawMessage(`{"amount":5}`), IdempotencyKey: "root/s1/step-3/0", SessionID: "s1"}
	out, err := hook.Execute(context.Background(), call)
	require.NoError(t, err)
	assert.Equal(t, `{"ok":true}`, out)
	require.Equal(t, []string{"http://127.0.0.1:9999/hook"}, rt.urls())
	req := rt.reqs[0]
	assert.Equal(t, "root/s1/step-3/0", req.Header.Get(web.IDHeader))
	assert.Equal(t, "root/s1/step-3/0", req.Header.Get(web.IdempotencyKeyHeader))
	assert.Equal(t, "call-7", req.Header.Get(web.CallIDHeader))
	key, err := web.SigningKey(secret)
	require.NoError(t, err)
	require.NoError(t, web.Verify(key, req.Header, []byte(rt.bodies[0]), time.Now()))

	redirect := &fakeTransport{respond: answer(307, httpmsg.Header{"Location": {"http://127.0.0.1:9999/elsewhere"}}, "")}
	hook, err = web.NewWebhook(web.WebhookSpec{Name: "ledger", Description: "d", URL: "http://127.0.0.1:9999/hook", Secret: web.NewSecret(secret)}, fetchPolicy(redirect))
	require.NoError(t, err)
	_, err = hook.Execute(context.Background(), call)
	require.Error(t, err, "a redirect is an answer, not followed")
	assert.Equal(t, []string{"http://127.0.0.1:9999/hook"}, redirect.urls())

	_, err = web.NewHTTPRequest(policy).Execute(context.Background(), fetchCall(t, map[string]any{"url": "http://127.0.0.1:9999/hook"}))
	require.ErrorIs(t, err, web.ErrDenied, "the webhook's trust is its own")
	assert.Len(t, rt.urls(), 1)
}
