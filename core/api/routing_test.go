package api_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/internal/treetest"
)

var updateRouting = flag.Bool("update-routing", false, "rewrite testdata/routing.golden from the handlers' answers")

// routingRequests are requests whose answer depends on routing alone:
// every route with each method, HEAD, trailing slashes, escaped segments
// (%2F inside an id, an escaped literal), unclean and odd paths.
var routingRequests = func() []string {
	var out []string
	paths := []string{
		"/healthz", "/healthz/", "/", "/v1", "/v1/sessions", "/v1/sessions/", "/v1/sessions/t-1", "/v1/sessions/t-1/",
		"/v1/sessions/t-1.1", "/v1/sessions/t-1/prompt", "/v1/sessions/t-1/prom%70t", "/v1/%73essions/t-1",
		"/v1/sessions/t-1/interrupt", "/v1/sessions/t-1/events", "/v1/sessions/t-1/permissions",
		"/v1/sessions/t-1/permissions/r1", "/v1/sessions/t-1/questions", "/v1/sessions/t-1/questions/q%2F1",
		"/v1/sessions/t-1/nope", "/v1/sessions/t-1/permissions/r1/x", "/v1/sessions/a%2Fb", "/v1/sessions/a%2Fb/prompt",
		"/v1/sessions/t-1%2Fprompt", "/v1/sessions/%2F", "/v1/sessions/%2F/events", "/v1/sessions/%2e%2e", "/v1/sessions/%2E",
		"//v1/sessions", "/v1/sessions/t-1/../t-1", "/v1/sessions/./t-1", "/v1/sessions/t-1/.", "/v1//sessions",
		"/v1/sessions/t-1/test/x", "*",
	}
	for _, p := range paths {
		for _, m := range []string{"GET", "HEAD", "POST", "DELETE", "PUT", "OPTIONS"} {
			out = append(out, m+" "+p)
		}
	}
	return out
}()

// answer is what routing shows of an answer: status, error type, Allow.
func answer(w *httptest.ResponseRecorder) string {
	var e api.ErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	s := fmt.Sprint(w.Code)
	if e.Error.Type != "" {
		s += " " + string(e.Error.Type) + " " + e.Error.Message
	}
	if a := w.Header().Get("Allow"); a != "" {
		s += " Allow: " + a
	}
	return s
}

// Routing answers as it did with http.ServeMux: testdata/routing.golden
// was recorded from the handlers before they moved to core/api/route,
// through the composed Handler and the Directory (ServeHTTP: Admit, then
// the route), and through Directory.ServeRoute and TreeHandler.ServeTree,
// which a Durable Object calls without Admit (its front Worker did it).
// Only the last two differ from then, and only on unclean paths (//v1/…,
// /./, /../), which every host refuses in Admit before: ServeMux answered
// them with a 307 redirect or a 405 for the cleaned path; they are now 404
// no route, like every unclean path. And a 405's Allow names HEAD beside
// GET, which ServeMux left out though it served HEAD there, so a HEAD
// that one part (the directory, the tree handler) leaves to the other is
// its 404 no route, as the GET is.
func TestRoutingAsBefore(t *testing.T) {
	trees := newMemTrees(t, treetest.NewDriver(4))
	h, err := api.New(api.Deps{Trees: trees, Auth: api.Anonymous{}, Clock: fakehost.NewClock(treetest.Start), IDs: &fakehost.IDs{Prefix: "t"}}, api.NewConfig())
	require.NoError(t, err)
	t.Cleanup(h.Close)
	d, err := api.NewDirectory(api.DirectoryDeps{Index: indexOnly{trees}, Auth: api.Anonymous{}, IDs: &fakehost.IDs{Prefix: "d"}}, api.NewConfig())
	require.NoError(t, err)
	th, err := api.NewTreeHandler(api.TreeDeps{Clock: fakehost.NewClock(treetest.Start)}, api.NewConfig())
	require.NoError(t, err)
	t.Cleanup(th.Close)

	w := httptest.NewRecorder()
	asHTTP(h).ServeHTTP(w, httptest.NewRequest("POST", "/v1/sessions", strings.NewReader("{}")))
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &created))
	require.Equal(t, "t-1", created.ID)
	inst, _, err := trees.Get(t.Context(), "t-1")
	require.NoError(t, err)
	tree := api.Tree{RootID: "t-1", Principal: api.AnonymousPrincipal, Instance: inst}

	var got []string
	for _, rq := range routingRequests {
		method, target, _ := strings.Cut(rq, " ")
		serve := func(name string, fn func(w http.ResponseWriter, r *http.Request)) {
			r := httptest.NewRequest(method, target, nil)
			if method == "OPTIONS" {
				r.Header.Set("Access-Control-Request-Method", "GET")
			}
			if strings.HasSuffix(target, "/events") && method == "GET" {
				return // a stream: its routing is HEAD's
			}
			if method == "DELETE" && (target == "/v1/sessions/t-1" || target == "/v1/%73essions/t-1") {
				return // would delete the tree the other requests ask for
			}
			w := httptest.NewRecorder()
			fn(w, r)
			got = append(got, fmt.Sprintf("%-8s %s %s → %s", name, method, target, answer(w)))
		}
		serve("handler", asHTTP(h).ServeHTTP)
		serve("dir", asHTTP(d).ServeHTTP)
		serve("route", func(w http.ResponseWriter, r *http.Request) { serveRoute(d, w, r) })
		serve("tree", func(w http.ResponseWriter, r *http.Request) { serveTree(th, w, r, tree) })
	}
	const golden = "testdata/routing.golden"
	if *updateRouting {
		require.NoError(t, os.WriteFile(golden, []byte(strings.Join(got, "\n")+"\n"), 0o644))
	}
	raw, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"), got)
}

// A query string that does not parse is 400 before anything else reads
// it, on every route: its bad pairs are not silently dropped.
func TestMalformedQueryRefused(t *testing.T) {
	requireQueryRefused(t, "the query string does not parse",
		"/v1/sessions?limit=%zz", "/v1/sessions?cursor=a;b", "/v1/sessions/x/events?after=%")
}

// A parameter the API reads, given twice, is 400 on every route: the
// server would read only the first, so ?limit=5&limit=abc would be served
// with its bad half unseen (as a JSON field given twice is refused).
// A parameter no route reads may repeat.
func TestRepeatedQueryParameterRefused(t *testing.T) {
	requireQueryRefused(t, "more than once",
		"/v1/sessions?limit=5&limit=abc", "/v1/sessions?cursor=&cursor=x", "/v1/sessions/x/events?after=1&after=2", "/v1/sessions/x?before=1&limit=2&before=-1")
}

// requireQueryRefused asks a directory for each target, which must be
// 400 invalid_request saying message, and then for a list whose query
// parses, repeating only a parameter no route reads, which must be 200.
func requireQueryRefused(t *testing.T, message string, targets ...string) {
	t.Helper()
	trees := newMemTrees(t, treetest.NewDriver(4))
	d, err := api.NewDirectory(api.DirectoryDeps{Index: indexOnly{trees}, Auth: api.Anonymous{}, IDs: &fakehost.IDs{Prefix: "d"}}, api.NewConfig())
	require.NoError(t, err)
	for _, target := range targets {
		w := httptest.NewRecorder()
		asHTTP(d).ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), w.Body.String())
		assert.Equal(t, 400, w.Code, target)
		assert.Equal(t, "invalid_request", string(e.Error.Type), target)
		assert.Contains(t, e.Error.Message, message, target)
	}
	w := httptest.NewRecorder()
	asHTTP(d).ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions?limit=5&x=1&x=2", nil))
	assert.Equal(t, 200, w.Code, w.Body.String())
}

// An error message repeats at most core.EchoLimit bytes of a request
// value (docs/api.md): a long path that matches no route, a long unclean
// path, a long method, and a long path a method is not allowed on.
func TestRoutingErrorsClipTheRequestValues(t *testing.T) {
	trees := newMemTrees(t, treetest.NewDriver(4))
	d, err := api.NewDirectory(api.DirectoryDeps{Index: indexOnly{trees}, Auth: api.Anonymous{}, IDs: &fakehost.IDs{Prefix: "d"}}, api.NewConfig())
	require.NoError(t, err)
	long := strings.Repeat("a", 3*core.EchoLimit)
	clipped := strings.Repeat("a", core.EchoLimit) + "…"
	for _, tc := range []struct {
		method, target string
		code           int
		want           string
	}{
		{"GET", "/v1/" + long, 404, "no route /v1/" + clipped[:core.EchoLimit-len("/v1/")] + "…"},
		{"GET", "//v1/" + long, 404, "no route //v1/" + clipped[:core.EchoLimit-len("//v1/")] + "… (a path has no empty, . or .. segments)"},
		{strings.ToUpper(long), "/v1/sessions", 405, strings.ToUpper(clipped) + " is not allowed on /v1/sessions"},
		{"PUT", "/v1/sessions/" + long, 405, "PUT is not allowed on /v1/sessions/" + clipped[:core.EchoLimit-len("/v1/sessions/")] + "…"},
	} {
		w := httptest.NewRecorder()
		asHTTP(d).ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e), w.Body.String())
		assert.Equal(t, tc.code, w.Code, tc.target)
		assert.Equal(t, tc.want, e.Error.Message)
	}
}

// Every JSON answer, an error quoting the request's path included, tells
// a browser not to read it as anything but JSON.
func TestJSONAnswersAreNosniff(t *testing.T) {
	trees := newMemTrees(t, treetest.NewDriver(4))
	d, err := api.NewDirectory(api.DirectoryDeps{Index: indexOnly{trees}, Auth: api.Anonymous{}, IDs: &fakehost.IDs{Prefix: "d"}}, api.NewConfig())
	require.NoError(t, err)
	for _, target := range []string{"/healthz", "/v1/sessions", "/<script>alert(1)</script>"} {
		w := httptest.NewRecorder()
		asHTTP(d).ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		assert.Equal(t, "application/json", w.Header().Get("Content-Type"), target)
		assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"), target)
	}
}
