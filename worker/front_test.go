package worker_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/worker"
)

func decide(t *testing.T, f *worker.Front, method, target string, header http.Header) (worker.Decision, *httptest.ResponseRecorder) {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Host = "127.0.0.1:8787"
	for k, vs := range header {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	return f.Decide(nethttp.Writer(w), nethttp.Request(r)), w
}

func TestDecideRefusesBadIDsBeforeAnyObject(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	for _, target := range []string{
		"/v1/sessions/bad..id", "/v1/sessions/%00", "/v1/sessions/a.", "/v1/sessions/.a",
		"/v1/sessions/" + strings.Repeat("a", 65), "/v1/sessions/x%2Fy", "/v1/sessions/caf%C3%A9",
	} {
		d, w := decide(t, f, http.MethodPost, target+"/prompt", nil)
		assert.Equal(t, worker.Answered, d.Kind, target)
		assert.Equal(t, http.StatusNotFound, w.Code, target)
		assert.JSONEq(t, `{"error":{"type":"not_found","message":"no such session"}}`, w.Body.String(), target)
	}
}

func TestDecideRoutes(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	cases := []struct {
		method, target string
		kind           worker.Kind
		root, url      string
	}{
		{"POST", "/v1/sessions", worker.Create, "", ""},
		{"GET", "/v1/sessions?limit=2", worker.List, "", "/trees?limit=2"},
		{"GET", "/v1/sessions/abc", worker.Forward, "abc", "/v1/sessions/abc"},
		{"GET", "/v1/sessions/abc.def_1-2?limit=2", worker.Forward, "abc", "/v1/sessions/abc.def_1-2?limit=2"},
		{"GET", "/v1/sessions/abc/events?after=3&access_token=s3cret", worker.Forward, "abc", "/v1/sessions/abc/events?after=3"},
		{"POST", "/v1/sessions/abc/prompt", worker.Forward, "abc", "/v1/sessions/abc/prompt"},
		{"DELETE", "/v1/sessions/abc", worker.Delete, "abc", "/v1/sessions/abc"},
		// A child's id goes on to the owner check, as on the local server
		// (an unknown or another principal's tree is 404); the object
		// refuses it (400) once the caller is known to own the tree.
		{"DELETE", "/v1/sessions/abc.def", worker.Delete, "abc", "/v1/sessions/abc.def"},
		{"DELETE", "/v1/sessions/abc.", worker.Delete, "abc", "/v1/sessions/abc."},
		// The id as the router matches it, unescaped; forwarded as sent.
		{"GET", "/v1/sessions/%61bc.%31", worker.Forward, "abc", "/v1/sessions/%61bc.%31"},
	}
	for _, c := range cases {
		d, w := decide(t, f, c.method, c.target, nil)
		assert.Equal(t, c.kind, d.Kind, c.target)
		assert.Equal(t, "anonymous", d.Principal, c.target)
		assert.Equal(t, c.root, d.Root, c.target)
		assert.Equal(t, c.url, d.URL, c.target)
		assert.Equal(t, c.kind == worker.Delete && strings.Contains(c.url, "."), d.Child, c.target)
		assert.Zero(t, w.Body.Len(), c.target)
	}
}

func TestDecideAnswers(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	cases := []struct {
		method, target string
		status         int
		typ            string
	}{
		{"GET", "/healthz", 200, ""},
		{"DELETE", "/v1/sessions/a%20c.1", 404, "not_found"},
		{"PUT", "/v1/sessions/abc", 405, "method_not_allowed"},
		{"GET", "/v1/nothing", 404, "not_found"},
		{"GET", "/v1/sessions/abc/..", 404, "not_found"},
	}
	for _, c := range cases {
		d, w := decide(t, f, c.method, c.target, nil)
		assert.Equal(t, worker.Answered, d.Kind, c.target)
		assert.Equal(t, c.status, w.Code, c.target)
		assert.Equal(t, "application/json", w.Header().Get("Content-Type"), c.target)
		assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"), c.target)
		assert.Equal(t, "no-store", w.Header().Get("Cache-Control"), c.target)
		if c.typ != "" {
			assert.Contains(t, w.Body.String(), `"type":"`+c.typ+`"`, c.target)
		}
	}
}

func TestDecideWithoutTokensAnswersOnlyLoopback(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
	r.Host = "revenant.example.workers.dev"
	w := httptest.NewRecorder()
	assert.Equal(t, worker.Answered, f.Decide(nethttp.Writer(w), nethttp.Request(r)).Kind)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "forbidden_host")
}

func TestDecideTokens(t *testing.T) {
	for _, blank := range []string{" ", " , "} {
		_, err := worker.New(worker.Options{Tokens: blank})
		assert.ErrorContains(t, err, "REVENANT_TOKENS: no tokens", "set but blank is refused, as the local server refuses it: %q", blank)
	}
	f, err := worker.New(worker.Options{Tokens: "alice:a-token,bob:b-token"})
	require.NoError(t, err)
	d, w := decide(t, f, "GET", "/v1/sessions/abc", nil)
	assert.Equal(t, worker.Answered, d.Kind)
	assert.Equal(t, http.StatusUnauthorized, w.Code)

	d, _ = decide(t, f, "GET", "/v1/sessions/abc", http.Header{"Authorization": {"Bearer b-token"}})
	assert.Equal(t, worker.Forward, d.Kind)
	assert.Equal(t, "bob", d.Principal)
	// The scheme's name is case-insensitive (RFC 9110 §11.1).
	d, _ = decide(t, f, "GET", "/v1/sessions/abc", http.Header{"Authorization": {"bearer b-token"}})
	assert.Equal(t, worker.Forward, d.Kind)
	assert.Equal(t, "bob", d.Principal)

	// ?access_token= only on the event stream, as on the local server.
	d, w = decide(t, f, "GET", "/v1/sessions/abc?access_token=a-token", nil)
	assert.Equal(t, worker.Answered, d.Kind)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	d, _ = decide(t, f, "GET", "/v1/sessions/abc/events?access_token=a-token", nil)
	assert.Equal(t, worker.Forward, d.Kind)
	assert.Equal(t, "alice", d.Principal)
	assert.Equal(t, "/v1/sessions/abc/events", d.URL)
	// ... and only for a request with no Authorization header at all.
	d, w = decide(t, f, "GET", "/v1/sessions/abc/events?access_token=a-token", http.Header{"Authorization": {"Bearer"}})
	assert.Equal(t, worker.Answered, d.Kind)
	assert.Equal(t, http.StatusUnauthorized, w.Code)

	_, err = worker.New(worker.Options{Tokens: "alice"})
	assert.Error(t, err)
}

func TestListQuery(t *testing.T) {
	limit, after, err := worker.ParseListQuery(url.Values{}, api.DefaultListLimit)
	require.NoError(t, err)
	assert.Equal(t, 50, limit)
	assert.Nil(t, after)

	c := api.ListCursor{CreatedAt: 1700000000123, ID: "abc"}
	limit, after, err = worker.ParseListQuery(url.Values{"limit": {"2"}, "cursor": {c.Encode()}}, api.DefaultListLimit)
	require.NoError(t, err)
	assert.Equal(t, 2, limit)
	assert.Equal(t, &c, after)

	for _, q := range []url.Values{
		{"limit": {"0"}}, {"limit": {"201"}}, {"limit": {"x"}}, {"limit": {"+5"}},
		{"cursor": {"!!"}}, {"cursor": {"LTU6eA"}}, {"cursor": {api.ListCursor{ID: "a/b"}.Encode()}},
		{"cursor": {api.ListCursor{ID: "a.b"}.Encode()}}, // a child's id: a cursor names a root
	} {
		_, _, err := worker.ParseListQuery(q, api.DefaultListLimit)
		assert.Error(t, err, q)
	}
	// Said as the local server says it (host.List).
	_, _, err = worker.ParseListQuery(url.Values{"cursor": {"bogus"}}, api.DefaultListLimit)
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, `cursor "bogus" is not one this server returned`, ae.Message)
}

// A list without a limit gets the session_page_size setting the front was
// given (REVENANT_SETTINGS), as on the local server; an explicit limit wins.
func TestDecideListUsesTheConfiguredPageSize(t *testing.T) {
	f, err := worker.New(worker.Options{Tokens: "alice:a-token", ListLimit: 7})
	require.NoError(t, err)
	auth := http.Header{"Authorization": {"Bearer a-token"}}
	d, _ := decide(t, f, "GET", "/v1/sessions", auth)
	assert.Equal(t, worker.List, d.Kind)
	assert.Equal(t, worker.DirectoryListPath(7, nil), d.URL)
	d, _ = decide(t, f, "GET", "/v1/sessions?limit=3", auth)
	assert.Equal(t, worker.DirectoryListPath(3, nil), d.URL)

	f, err = worker.New(worker.Options{Tokens: "alice:a-token"})
	require.NoError(t, err)
	d, _ = decide(t, f, "GET", "/v1/sessions", auth)
	assert.Equal(t, worker.DirectoryListPath(api.DefaultListLimit, nil), d.URL)
}

// The front reads limit as the local server does (api.IntParam): an empty
// limit is the default, and a bad one is refused in the same words.
func TestListQueryLimitAsLocal(t *testing.T) {
	limit, _, err := worker.ParseListQuery(url.Values{"limit": {""}}, api.DefaultListLimit)
	require.NoError(t, err)
	assert.Equal(t, api.DefaultListLimit, limit)

	_, _, err = worker.ParseListQuery(url.Values{"limit": {"x"}}, api.DefaultListLimit)
	e := api.ErrorOf(err)
	assert.Equal(t, api.ErrInvalidRequest, e.Type)
	assert.Equal(t, "limit must be a whole number from 1 to 200", e.Message)
}

func TestNewRootIDIsValid(t *testing.T) {
	id := worker.NewRootID()
	root, ok := worker.ValidID(id)
	assert.True(t, ok)
	assert.Equal(t, id, root)
	assert.Len(t, id, 26)
	assert.Equal(t, strings.ToLower(id), id, "lowercase, as host.RandomIDs writes them")
	assert.NotEqual(t, id, worker.NewRootID())
}

// The front refuses a create's body the API would refuse before any
// object exists, with the API's answer.
func TestCheckCreateIsTheAPIsDecode(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	for body, typ := range map[string]api.ErrorType{
		`not json`:                            api.ErrInvalidJSON,
		`{"bogus":1}`:                         api.ErrInvalidRequest,
		`{"config":{"model":5}}`:              api.ErrInvalidRequest,
		`{"config":{"tools":"kv"}}`:           api.ErrInvalidRequest,
		`{"a":1,"a":1}`:                       api.ErrInvalidJSON, // named twice before unknown
		`{"config":{"x":1,"x":2}}`:            api.ErrInvalidJSON,
		`{"bogus":1,"config":{},"config":{}}`: api.ErrInvalidJSON,
	} {
		err := f.CheckCreate([]byte(body))
		assert.ErrorIs(t, err, typ, body)
		_, want := api.DecodeCreate([]byte(body))
		assert.Equal(t, api.ErrorOf(want), api.ErrorOf(err), body)
	}
	for _, body := range []string{``, `{}`, `{"config":{"model":"m","tools":[]}}`} {
		assert.NoError(t, f.CheckCreate([]byte(body)), body)
	}
}

// An allowed origin gets the local server's CORS answers from the front:
// its preflight is answered by Decide, and an admitted request carries the
// headers every answer to it must have; another origin is 403.
func TestDecideAllowedOrigins(t *testing.T) {
	const console = "https://console.example"
	f, err := worker.New(worker.Options{AllowedOrigins: []string{console}})
	require.NoError(t, err)

	d, w := decide(t, f, http.MethodOptions, "/v1/sessions/abc/prompt",
		http.Header{"Origin": {console}, "Access-Control-Request-Method": {"POST"}})
	assert.Equal(t, worker.Answered, d.Kind)
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Equal(t, console, w.Header().Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "GET, POST, DELETE", w.Header().Get("Access-Control-Allow-Methods"))
	assert.Equal(t, "Authorization, Content-Type, Idempotency-Key, Last-Event-ID", w.Header().Get("Access-Control-Allow-Headers"))

	d, w = decide(t, f, http.MethodGet, "/v1/sessions/abc", http.Header{"Origin": {console}})
	assert.Equal(t, worker.Forward, d.Kind)
	assert.Equal(t, console, w.Header().Get("Access-Control-Allow-Origin"), "the headers the forwarded answer gets")
	assert.Equal(t, "Origin", w.Header().Get("Vary"))
	assert.Equal(t, "Retry-After", w.Header().Get("Access-Control-Expose-Headers"), "a page may read a 429's or 503's Retry-After")

	d, w = decide(t, f, http.MethodGet, "/v1/sessions/abc", http.Header{"Origin": {"https://evil.example"}})
	assert.Equal(t, worker.Answered, d.Kind)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), `"type":"forbidden_origin"`)
}

// A POST declaring a body over the cap is marked TooLarge (its body is
// never read); one at the cap is not. Other methods' bodies are ignored,
// as the local server ignores them.
func TestDecideTooLarge(t *testing.T) {
	f, err := worker.New(worker.Options{MaxBody: 100})
	require.NoError(t, err)
	for _, c := range []struct {
		method, target, length string
		want                   bool
	}{
		{"POST", "/v1/sessions", "101", true},
		{"POST", "/v1/sessions/abc/prompt", "101", true},
		{"POST", "/v1/sessions/abc/prompt", "100", false},
		{"POST", "/v1/sessions/abc/prompt", "", false},
		{"DELETE", "/v1/sessions/abc", "101", false},
		{"POST", "/v1/sessions/abc/interrupt", "101", false}, // its handler reads no body
		{"POST", "/v1/sessions/abc/permissions/p-x-0", "101", true},
		{"POST", "/v1/sessions/abc/prompt", "9223372036854775807", true},
		{"POST", "/v1/sessions/abc/prompt", "9223372036854775808", true},     // past int64
		{"POST", "/v1/sessions/abc/prompt", "99999999999999999999999", true}, // far past it
		{"POST", "/v1/sessions/abc/prompt", "-99999999999999999999", false},  // malformed, not large
	} {
		h := http.Header{}
		if c.length != "" {
			h.Set("Content-Length", c.length)
		}
		d, _ := decide(t, f, c.method, c.target, h)
		assert.NotEqual(t, worker.Answered, d.Kind, c)
		assert.Equal(t, c.want, d.TooLarge, c)
	}
}

// A route whose handler reads no body (an interrupt) is Bodiless: the
// front sends its object none, so a body held back cannot hold the
// answer. Every route that reads one is not, nor is a create.
func TestDecideBodiless(t *testing.T) {
	f, err := worker.New(worker.Options{MaxBody: 100})
	require.NoError(t, err)
	for _, c := range []struct {
		method, target string
		want           bool
	}{
		{"POST", "/v1/sessions/abc/interrupt", true},
		{"POST", "/v1/sessions", false},
		{"POST", "/v1/sessions/abc/prompt", false},
		{"POST", "/v1/sessions/abc/permissions/p-x-0", false},
		{"POST", "/v1/sessions/abc/questions/q-x-0", false},
	} {
		h := http.Header{"Content-Length": {"2000000"}}
		d, _ := decide(t, f, c.method, c.target, h)
		assert.NotEqual(t, worker.Answered, d.Kind, c)
		assert.Equal(t, c.want, d.Bodiless, c)
	}
}

// The front's 413 is the API's own, word for word, for the default cap
// and a configured one; a create at the cap is checked as usual.
func TestTooLargeAsLocal(t *testing.T) {
	for _, limit := range []int64{0, 2048} {
		f, err := worker.New(worker.Options{MaxBody: limit})
		require.NoError(t, err)
		cfg := api.NewConfig()
		if limit != 0 {
			cfg = cfg.WithMaxBody(limit)
		}
		dir, err := api.NewDirectory(api.DirectoryDeps{Index: noIndex{}, Auth: api.Anonymous{}, IDs: fixedID{}}, cfg)
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodPost, "/v1/sessions", strings.NewReader(strings.Repeat(" ", int(f.MaxBody())+1)))
		r.Host = "127.0.0.1"
		local := httptest.NewRecorder()
		dir.ServeHTTP(nethttp.Writer(local), nethttp.Request(r))
		require.Equal(t, http.StatusRequestEntityTooLarge, local.Code)

		front := httptest.NewRecorder()
		api.WriteError(nethttp.Writer(front), f.TooLarge())
		assert.Equal(t, local.Code, front.Code)
		assert.Equal(t, local.Body.String(), front.Body.String())

		assert.Equal(t, f.TooLarge(), f.CheckCreate(make([]byte, f.MaxBody()+1)))
		atCap := append([]byte("{}"), []byte(strings.Repeat(" ", int(f.MaxBody())-2))...)
		assert.NoError(t, f.CheckCreate(atCap), "a body at the cap is read")
	}
}

type noIndex struct{ api.Index }

type fixedID struct{}

func (fixedID) NewID() string { return "abc" }

// A create sent compressed is refused by the front, as the local server
// refuses it, before any object exists; a tree's route is forwarded, its
// object refusing it after the owner check (as core/api does), and an
// identity encoding is no encoding.
func TestDecideRefusesACompressedCreate(t *testing.T) {
	f, err := worker.New(worker.Options{})
	require.NoError(t, err)
	d, w := decide(t, f, "POST", "/v1/sessions", http.Header{"Content-Encoding": {"gzip"}})
	assert.Equal(t, worker.Answered, d.Kind)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "Content-Encoding")
	d, _ = decide(t, f, "POST", "/v1/sessions", http.Header{"Content-Encoding": {"identity"}})
	assert.Equal(t, worker.Create, d.Kind)
	d, _ = decide(t, f, "POST", "/v1/sessions/abcdefghijklmnopqrstuvwxyz/prompt", http.Header{"Content-Encoding": {"gzip"}})
	assert.Equal(t, worker.Forward, d.Kind)
}

// A compressed create declared over the cap goes on marked TooLarge, so
// entry.mjs answers it 413 unread, as a tree's route is answered and as
// the local server answers both (the declared length is judged before the
// encoding; probe 63 found it 400 here).
func TestDecideCompressedCreateOverTheCapIsTooLarge(t *testing.T) {
	f, err := worker.New(worker.Options{MaxBody: 100})
	require.NoError(t, err)
	for _, target := range []string{"/v1/sessions", "/v1/sessions/abcdefghijklmnopqrstuvwxyz/prompt"} {
		d, w := decide(t, f, "POST", target, http.Header{"Content-Encoding": {"gzip"}, "Content-Length": {"101"}})
		assert.NotEqual(t, worker.Answered, d.Kind, "%s: %d %s", target, w.Code, w.Body)
		assert.True(t, d.TooLarge, target)
	}
}
