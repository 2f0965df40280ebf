package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/treetest"
)

const console = "https://console.example"

// sourceHandler is a handler over memTrees with the Host and Origin checks
// of a server: cfg's, and console allowed.
func sourceHandler(t *testing.T, auth api.Authenticator, loopbackOnly bool) (*api.Handler, *memTrees) {
	trees := newMemTrees(t, treetest.NewDriver(4))
	h, err := api.New(api.Deps{Trees: trees, Auth: auth, Clock: fakehost.NewClock(treetest.Start), IDs: &fakehost.IDs{Prefix: "r"}},
		api.NewConfig().WithLoopbackOnly(loopbackOnly).WithAllowedOrigins(console))
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h, trees
}

// serve sends one request straight to the handler: host is the Host header
// ("" as HTTP/1.0 may send), origin the Origin header if not "".
func serve(h httpmsg.Handler, method, path, host, origin, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Host = host
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	nethttp.Handler(h).ServeHTTP(w, r)
	return w
}

func errorTypeOf(t *testing.T, w *httptest.ResponseRecorder) api.ErrorType {
	t.Helper()
	var e api.ErrorBody
	require.NoError(t, jsonDecode(w.Body.String(), &e), w.Body.String())
	return e.Error.Type
}

// Without tokens, a request whose Host is not a loopback name or address
// (DNS rebinding: a page's own name pointed at 127.0.0.1) is 403
// forbidden_host and does nothing; loopback names and addresses, in every
// spelling, are served.
func TestForeignHostRefusedWithoutTokens(t *testing.T) {
	h, trees := sourceHandler(t, api.Anonymous{}, true)
	for _, host := range []string{
		"rebind.attacker.example:8787", "rebind.attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io",
		"0.0.0.0:8787", "10.0.0.1", "[fe80::1]:8787", "[::1%25lo]:8787", "[::1", "[::1]x", "localhost:99999",
		"localhost:80a", "localhost..", "2130706433", "127.1", "[::2]", "[::1]:99999", "[::1]:80a", "[::1]8787",
	} {
		for _, rq := range []struct{ method, path, body string }{
			{"GET", "/v1/sessions", ""}, {"POST", "/v1/sessions", "{}"}, {"GET", "/healthz", ""}, {"GET", "/nope", ""},
		} {
			w := serve(h, rq.method, rq.path, host, "", rq.body, "Content-Type", "text/plain")
			assert.Equal(t, http.StatusForbidden, w.Code, "Host %q: %s %s", host, rq.method, rq.path)
			assert.Equal(t, api.ErrForbiddenHost, errorTypeOf(t, w), "Host %q", host)
		}
	}
	assert.Empty(t, trees.trees, "a refused create created nothing")
	for _, host := range []string{
		"127.0.0.1:8787", "127.0.0.1", "127.9.8.7:1", "localhost", "localhost:8787", "LocalHost:8787", "localhost.", "localhost.:8787",
		"[::1]:8787", "[::1]", "::1", "[::ffff:127.0.0.1]:8787", "",
	} {
		w := serve(h, "GET", "/v1/sessions", host, "", "")
		assert.Equal(t, http.StatusOK, w.Code, "Host %q: %s", host, w.Body)
	}
}

// With tokens, any Host is served (the token is the defence); a browser
// Origin is still checked.
func TestHostNotCheckedWithTokens(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a")
	require.NoError(t, err)
	h, _ := sourceHandler(t, tokens, false)
	w := serve(h, "GET", "/v1/sessions", "api.example.com", "", "", "Authorization", "Bearer secret-a")
	assert.Equal(t, http.StatusOK, w.Code)
	w = serve(h, "POST", "/v1/sessions", "api.example.com", "https://evil.example", "{}", "Authorization", "Bearer secret-a")
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Equal(t, api.ErrForbiddenOrigin, errorTypeOf(t, w))
}

// A request carrying an Origin that is not allowed is 403 forbidden_origin
// and does nothing, whatever else it is: the cross-site "simple" POST with
// Content-Type: text/plain that would create a session or admit a prompt
// included. An allowed origin is served with the CORS headers a browser
// needs, and its preflight answered.
// An empty Origin is no browser's: it is served as if absent, as on
// Cloudflare, which drops an empty header before the Worker sees it.
func TestEmptyOriginIsAbsent(t *testing.T) {
	h, _ := sourceHandler(t, api.Anonymous{}, true)
	w := serve(h, "POST", "/v1/sessions", "127.0.0.1:8787", "", "{}", "Origin", "")
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	assert.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
	r := httptest.NewRequest("GET", "/v1/sessions", nil)
	r.Host = "127.0.0.1:8787"
	r.Header["Origin"] = []string{"", "https://evil.example"}
	w = httptest.NewRecorder()
	nethttp.Handler(h).ServeHTTP(w, r)
	assert.Equal(t, http.StatusForbidden, w.Code, "an empty Origin beside another is no excuse")
}

func TestForeignOriginRefused(t *testing.T) {
	h, trees := sourceHandler(t, api.Anonymous{}, true)
	created := serve(h, "POST", "/v1/sessions", "127.0.0.1:8787", "", "")
	require.Equal(t, http.StatusCreated, created.Code)
	id := strings.Split(created.Body.String(), `"`)[3]
	before := trees.tree(id).tree.Events(id)
	for _, origin := range []string{"https://evil.example", "null", "https://console.example.evil", "http://console.example", "https://console.example:8443", " "} {
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/v1/sessions", "{}"},
			{"POST", "/v1/sessions/" + id + "/prompt", `{"text":"call a tool"}`},
			{"GET", "/v1/sessions/" + id, ""},
			{"GET", "/healthz", ""},
			{"OPTIONS", "/v1/sessions", ""},
		} {
			w := serve(h, rq.method, rq.path, "127.0.0.1:8787", origin, rq.body, "Content-Type", "text/plain", "Access-Control-Request-Method", "POST")
			assert.Equal(t, http.StatusForbidden, w.Code, "Origin %q: %s %s", origin, rq.method, rq.path)
			assert.Equal(t, api.ErrForbiddenOrigin, errorTypeOf(t, w), "Origin %q", origin)
			assert.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
		}
	}
	assert.Len(t, trees.trees, 1, "no session was created")
	assert.Equal(t, before, trees.tree(id).tree.Events(id), "no prompt was admitted")

	w := serve(h, "GET", "/v1/sessions", "localhost:8787", console, "")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, console, w.Header().Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "Origin", w.Header().Get("Vary"))
	w = serve(h, "OPTIONS", "/v1/sessions/"+id+"/prompt", "localhost:8787", console, "", "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Contains(t, w.Header().Get("Access-Control-Allow-Methods"), "POST")
	assert.Contains(t, w.Header().Get("Access-Control-Allow-Headers"), "Authorization")
	assert.Contains(t, w.Header().Get("Access-Control-Allow-Headers"), "Idempotency-Key", "a page may send a create's key")

	// An origin's host in another case is the same origin.
	w = serve(h, "GET", "/v1/sessions", "localhost:8787", "HTTPS://Console.Example", "")
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	// Two Origin headers are no origin a browser sends, an allowed one
	// first or not.
	two := httptest.NewRequest("GET", "/v1/sessions", nil)
	two.Host = "localhost:8787"
	two.Header.Add("Origin", console)
	two.Header.Add("Origin", "https://evil.example")
	w = httptest.NewRecorder()
	nethttp.Handler(h).ServeHTTP(w, two)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Empty(t, w.Header().Get("Access-Control-Allow-Origin"))
	// An OPTIONS without Access-Control-Request-Method is no preflight: it
	// is routed, and no route takes OPTIONS.
	w = serve(h, "OPTIONS", "/v1/sessions", "localhost:8787", console, "")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Empty(t, w.Header().Get("Access-Control-Allow-Methods"))
}

// Allowed origins are written as operators write them and compared as
// browsers send them.
func TestCanonicalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://console.example":       "https://console.example",
		"HTTPS://Console.Example/":      "https://console.example",
		"https://console.example:443":   "https://console.example",
		"http://localhost:3000":         "http://localhost:3000",
		"http://[::1]:3000":             "http://[::1]:3000",
		" http://127.0.0.1:80 ":         "http://127.0.0.1",
		"https://console.example:8443/": "https://console.example:8443",
		// A browser writes the port as a number, its scheme's default
		// left out.
		"https://console.example:08443": "https://console.example:8443",
		"https://console.example:0443":  "https://console.example",
		// The bounds of a port a URL can have.
		"http://localhost:1":     "http://localhost:1",
		"http://localhost:65535": "http://localhost:65535",
	} {
		got, err := api.CanonicalOrigin(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "null", "*", "console.example", "ftp://console.example", "https://console.example/app",
		"https://user:pw@console.example", "https://console.example?x=1", "https://",
		// No browser sends these, so they would allow nothing: a wildcard
		// is not a pattern here, and a browser sends a Unicode name in its
		// xn-- form.
		"https://*.example.com", "https://*", "https://bücher.example", "https://a%25b.example",
		// Nor a port no URL can have.
		"https://console.example:0", "https://console.example:65536", "https://console.example:99999",
		"https://console.example:" + strings.Repeat("9", 30)} {
		_, err := api.CanonicalOrigin(bad)
		assert.Error(t, err, bad)
	}
	got, err := api.ParseOrigins(" https://a.example, ,http://localhost:3000 ")
	require.NoError(t, err)
	assert.Equal(t, []string{"https://a.example", "http://localhost:3000"}, got)
	_, err = api.New(api.Deps{Trees: newMemTrees(t, treetest.NewDriver(1)), Auth: api.Anonymous{}, Clock: fakehost.NewClock(0), IDs: &fakehost.IDs{}},
		api.NewConfig().WithAllowedOrigins("https://a.example/path"))
	assert.Error(t, err, "New checks the allowed origins")
}

func jsonDecode(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// The directory compares the allowed origins as NewDirectory
// canonicalized them, however a library user wrote them.
func TestDirectoryAllowsOriginsAsCanonicalized(t *testing.T) {
	d, err := api.NewDirectory(api.DirectoryDeps{Index: newMemTrees(t, treetest.NewDriver(1)), Auth: api.Anonymous{}, IDs: &fakehost.IDs{}},
		api.NewConfig().WithLoopbackOnly(true).WithAllowedOrigins("HTTPS://Console.Example:443/"))
	require.NoError(t, err)
	w := serve(d, "GET", "/v1/sessions", "localhost:8787", console, "")
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, console, w.Header().Get("Access-Control-Allow-Origin"))
}

// A page of an allowed origin can read Retry-After: every answer to it
// names the header in Access-Control-Expose-Headers (a browser hides any
// header not CORS-safelisted otherwise), the 429 that carries it, an
// ordinary answer and the event stream's included.
func TestAllowedOriginMayReadRetryAfter(t *testing.T) {
	h, trees := sourceHandler(t, api.Anonymous{}, true)
	trees.prepare = func(tr *treetest.Tree) { tr.Cfg = tr.Cfg.WithQueueCap(1) }
	created := serve(h, "POST", "/v1/sessions", "localhost:8787", console, "")
	require.Equal(t, http.StatusCreated, created.Code, created.Body.String())
	assert.Equal(t, "Retry-After", created.Header().Get("Access-Control-Expose-Headers"))
	session := "/v1/sessions/" + strings.Split(created.Body.String(), `"`)[3]

	w := serve(h, "POST", session+"/prompt", "localhost:8787", console, `{"text":"hold"}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
	w = serve(h, "POST", session+"/prompt", "localhost:8787", console, `{"text":"one more"}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusTooManyRequests, w.Code, w.Body.String())
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
	assert.Equal(t, "Retry-After", w.Header().Get("Access-Control-Expose-Headers"), "the 429's Retry-After is readable")

	w = serve(h, "HEAD", session+"/events", "localhost:8787", console, "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
	assert.Equal(t, "Retry-After", w.Header().Get("Access-Control-Expose-Headers"), "the event stream")

	w = serve(h, "GET", "/v1/sessions", "localhost:8787", "", "")
	assert.Empty(t, w.Header().Get("Access-Control-Expose-Headers"), "no Origin, no CORS")
}
