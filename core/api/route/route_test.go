package route_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"

	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api/route"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// patterns are the API's routes (api.Routes, copied: route may not import
// api), the front Worker's test route, and a few that overlap to pin the
// precedence of literals over wildcards.
var patterns = []string{
	"GET /healthz",
	"POST /v1/sessions",
	"GET /v1/sessions",
	"GET /v1/sessions/{id}",
	"DELETE /v1/sessions/{id}",
	"POST /v1/sessions/{id}/prompt",
	"POST /v1/sessions/{id}/interrupt",
	"GET /v1/sessions/{id}/events",
	"GET /v1/sessions/{id}/permissions",
	"POST /v1/sessions/{id}/permissions/{rid}",
	"GET /v1/sessions/{id}/questions",
	"POST /v1/sessions/{id}/questions/{qid}",
	"POST /v1/sessions/{id}/test/{what}",
	// Overlapping: the literal wins where the paths differ first.
	"GET /o/{a}/x",
	"GET /o/lit/x",
	"GET /o/{a}/{b}",
	"HEAD /h/{a}",
	"GET /h/{a}",
}

// names are every wildcard name in patterns.
var names = []string{"id", "rid", "qid", "what", "a", "b"}

// serveMux is the reference: net/http's ServeMux over the same patterns,
// each handler answering its pattern and path values.
func serveMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Pattern", r.Pattern)
			for _, n := range names {
				if v := r.PathValue(n); v != "" {
					w.Header().Set("Value-"+n, v)
				}
			}
		})
	}
	return mux
}

func ourMux() *route.Mux {
	m := &route.Mux{}
	for _, p := range patterns {
		m.HandleFunc(p, func(w httpmsg.ResponseWriter, r *httpmsg.Request) {
			for _, n := range names {
				if v := r.PathValue(n); v != "" {
					w.Header().Set("Value-"+n, v)
				}
			}
		})
	}
	return m
}

// reference is what ServeMux routes (method, target) to: the pattern and
// the path values, and whether it would redirect (an unclean path).
func reference(t testing.TB, mux *http.ServeMux, method string, u *url.URL) (pattern string, values map[string]string, redirect bool) {
	r := &http.Request{Method: method, URL: u, Host: "example.test", Header: http.Header{}}
	_, pattern = mux.Handler(r)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, r)
	if rec.Code == http.StatusTemporaryRedirect || rec.Code == http.StatusMovedPermanently {
		return pattern, nil, true
	}
	values = map[string]string{}
	for _, n := range names {
		if v := rec.Header().Get("Value-" + n); v != "" {
			values[n] = v
		}
	}
	return pattern, values, false
}

// ours is what Mux routes the same request to.
func ours(m *route.Mux, method string, u *url.URL) (pattern string, values map[string]string) {
	r := &httpmsg.Request{Method: method, URL: u, Header: httpmsg.Header{}}
	_, pattern = m.Handler(r)
	w := &recorder{h: httpmsg.Header{}}
	m.ServeHTTP(w, r)
	values = map[string]string{}
	for _, n := range names {
		if v := w.h.Get("Value-" + n); v != "" {
			values[n] = v
		}
	}
	return pattern, values
}

type recorder struct {
	h      httpmsg.Header
	status int
}

func (w *recorder) Header() httpmsg.Header      { return w.h }
func (w *recorder) WriteHeader(s int)           { w.status = s }
func (w *recorder) Write(b []byte) (int, error) { return len(b), nil }

// compare checks that Mux routes (method, target) as ServeMux does. A
// path ServeMux would redirect (not clean) matches no route of Mux.
func compare(t testing.TB, sm *http.ServeMux, m *route.Mux, method, target string) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return
	}
	wantPattern, wantValues, redirect := reference(t, sm, method, u)
	gotPattern, gotValues := ours(m, method, u)
	if redirect {
		if gotPattern != "" {
			t.Fatalf("%s %s: ServeMux redirects (unclean path), Mux routes it to %q", method, target, gotPattern)
		}
		return
	}
	if gotPattern != wantPattern {
		t.Fatalf("%s %s: pattern %q, ServeMux says %q", method, target, gotPattern, wantPattern)
	}
	if wantPattern != "" && !assert.ObjectsAreEqual(wantValues, gotValues) {
		t.Fatalf("%s %s: path values %v, ServeMux says %v", method, target, gotValues, wantValues)
	}
}

var methods = []string{"GET", "HEAD", "POST", "DELETE", "PUT", "OPTIONS", "CONNECT"}

var targets = []string{
	"/", "", "/healthz", "/healthz/", "/HEALTHZ", "/v1/sessions", "/v1/sessions/", "/v1/sessions/s1",
	"/v1/sessions/s1.2", "/v1/sessions/s1/", "/v1/sessions/s1/prompt", "/v1/sessions/s1/prompt/",
	"/v1/sessions/s1/interrupt", "/v1/sessions/s1/events", "/v1/sessions/s1/events?after=3",
	"/v1/sessions/s1/permissions", "/v1/sessions/s1/permissions/r1", "/v1/sessions/s1/permissions/r1/x",
	"/v1/sessions/s1/questions", "/v1/sessions/s1/questions/q%201", "/v1/sessions/s1/test/boom",
	// Escapes: a %2F stays inside its segment; a literal may be escaped.
	"/v1/sessions/a%2Fb", "/v1/sessions/a%2Fb/prompt", "/v1/sessions/%2F", "/v1/sessions/%2F/prompt",
	"/v1/sessions/%2Fx", "/v1/sessions/x%2F", "/v1/sessions/%2F%2F", "/v1/sessions/s1/prom%70t", "/v1/%73essions",
	"/v1/sessions/%2e%2e", "/v1/sessions/%2E", "/v1/sessions/a%20b", "/v1/sessions/%zz", "/v1/sessions/%",
	"/v1/sessions/%25", "/v1/sessions/%7Bid%7D", "/v1/sessions/{id}",
	// Unclean paths, which ServeMux redirects.
	"//v1/sessions", "/v1//sessions", "/v1/sessions/x/..", "/v1/sessions/x/../y", "/v1/sessions/./x", "/./healthz",
	// Precedence.
	"/o/lit/x", "/o/other/x", "/o/lit/y", "/o/other/y", "/o/%6Cit/x", "/h/1",
}

func TestMuxRoutesAsServeMux(t *testing.T) {
	sm, m := serveMux(), ourMux()
	for _, method := range methods {
		for _, target := range targets {
			compare(t, sm, m, method, target)
		}
	}
}

func FuzzMuxRoutesAsServeMux(f *testing.F) {
	for _, target := range targets {
		f.Add("GET", target)
	}
	f.Add("HEAD", "/v1/sessions/x/events")
	f.Add("POST", "/o/lit/x")
	sm, m := serveMux(), ourMux()
	f.Fuzz(func(t *testing.T, method, target string) {
		if !validMethod(method) {
			return
		}
		compare(t, sm, m, method, target)
	})
}

// validMethod: what net/http would accept as a method (a token).
func validMethod(m string) bool {
	return m != "" && !strings.ContainsFunc(m, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	})
}

func TestPrecedence(t *testing.T) {
	m := ourMux()
	for target, want := range map[string]string{
		"/o/lit/x":   "GET /o/lit/x",
		"/o/other/x": "GET /o/{a}/x",
		"/o/lit/y":   "GET /o/{a}/{b}",
		"/o/other/y": "GET /o/{a}/{b}",
	} {
		match, ok := m.Match("GET", target)
		require.True(t, ok, target)
		assert.Equal(t, want, match.Pattern, target)
	}
	match, ok := m.Match("HEAD", "/h/1")
	require.True(t, ok)
	assert.Equal(t, "HEAD /h/{a}", match.Pattern, "a HEAD route wins over GET for HEAD")
	match, ok = m.Match("HEAD", "/v1/sessions/s1/events")
	require.True(t, ok)
	assert.Equal(t, "GET /v1/sessions/{id}/events", match.Pattern, "a GET route answers HEAD")
	assert.Equal(t, "s1", match.Value("id"))
	_, ok = m.Match("POST", "/v1/sessions/s1/events")
	assert.False(t, ok)
}

func TestPathValueUnescaped(t *testing.T) {
	m := ourMux()
	match, ok := m.Match("POST", "/v1/sessions/a%2Fb/questions/q%201")
	require.True(t, ok)
	assert.Equal(t, "a/b", match.Value("id"))
	assert.Equal(t, "q 1", match.Value("qid"))
	assert.Equal(t, "", match.Value("rid"))
	r := &httpmsg.Request{}
	match.SetPathValues(r)
	assert.Equal(t, "a/b", r.PathValue("id"))
	assert.Equal(t, "q 1", r.PathValue("qid"))
}

func TestBadPatternsPanic(t *testing.T) {
	for _, p := range []string{
		"/no/method", "GET", "GET no-slash", "GET /a//b", "GET /a/", "GET /{}", "GET /{a}/{a}", "GET /x{a}", "GET /{a",
		"GE/T /x", "GET /a{b", "GET /a}b",
	} {
		assert.Panics(t, func() { (&route.Mux{}).HandleFunc(p, nil) }, p)
	}
	// Conflicts are refused as ServeMux refuses them, and only those.
	for _, pair := range [][2]string{
		{"GET /a/{x}", "GET /{y}/b"}, // overlap, neither more specific
		{"GET /a/{x}", "GET /a/{y}"}, // the same paths
		{"GET /a", "GET /a"},
		{"GET /a/{x}/c", "GET /a/b/{y}"},
		{"GET /o/{a}/x", "GET /o/lit/{b}"},
	} {
		m, sm := &route.Mux{}, http.NewServeMux()
		m.HandleFunc(pair[0], nil)
		sm.HandleFunc(pair[0], func(http.ResponseWriter, *http.Request) {})
		assert.Panics(t, func() { m.HandleFunc(pair[1], nil) }, "%v", pair)
		assert.Panics(t, func() { sm.HandleFunc(pair[1], func(http.ResponseWriter, *http.Request) {}) }, "ServeMux: %v", pair)
	}
	for _, pair := range [][2]string{
		{"GET /a/{x}", "POST /{y}/b"},  // another method
		{"GET /a/{x}", "GET /a/b"},     // more specific
		{"GET /a/{x}", "GET /a/{x}/b"}, // another length
	} {
		m, sm := &route.Mux{}, http.NewServeMux()
		m.HandleFunc(pair[0], nil)
		sm.HandleFunc(pair[0], func(http.ResponseWriter, *http.Request) {})
		assert.NotPanics(t, func() { m.HandleFunc(pair[1], nil) }, "%v", pair)
		assert.NotPanics(t, func() { sm.HandleFunc(pair[1], func(http.ResponseWriter, *http.Request) {}) }, "ServeMux: %v", pair)
	}
}

func TestServeHTTPFallback(t *testing.T) {
	m := ourMux()
	w := &recorder{h: httpmsg.Header{}}
	m.ServeHTTP(w, &httpmsg.Request{Method: "GET", URL: &url.URL{Path: "/nope"}})
	assert.Equal(t, 404, w.status, "no fallback: a bare 404")
	called := false
	m.Fallback = httpmsg.HandlerFunc(func(httpmsg.ResponseWriter, *httpmsg.Request) { called = true })
	m.ServeHTTP(w, &httpmsg.Request{Method: "GET", URL: &url.URL{Path: "/nope"}})
	assert.True(t, called)
}

// A route registered without a handler (the front Worker names routes
// with them) is served by the fallback, as an unrouted request is, and
// a path that is not rooted matches nothing rather than panicking.
func TestServeHTTPNilHandlerAndUnrootedPaths(t *testing.T) {
	m := &route.Mux{}
	m.HandleFunc("GET /v1/sessions/{id}", nil)
	fellBack := false
	m.Fallback = httpmsg.HandlerFunc(func(httpmsg.ResponseWriter, *httpmsg.Request) { fellBack = true })
	match, ok := m.Match("GET", "/v1/sessions/abc")
	require.True(t, ok, "the route is named")
	assert.Equal(t, "GET /v1/sessions/{id}", match.Pattern)
	assert.Equal(t, "abc", match.Value("id"))
	assert.Empty(t, match.Value(""), "a literal segment is no value")
	m.ServeHTTP(&recorder{h: httpmsg.Header{}}, &httpmsg.Request{Method: "GET", URL: &url.URL{Path: "/v1/sessions/abc"}})
	assert.True(t, fellBack)

	for _, p := range []string{"", "v1/sessions/abc", "*"} {
		_, ok := m.Match("GET", p)
		assert.False(t, ok, "%q", p)
	}
}
