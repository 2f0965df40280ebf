package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/backend"
	"github.com/revenantrt/revenant/wasm/runtime"
)

const tokenSpec = "alice:alice-token,bob:bob-token"

// guestConfig is e's host configuration with trees run as guests of the
// test build of the guest module on the wazero backend (compiled code
// shared by every test binary: guestbuild.CacheDir). Open it once: the
// host closes the backend.
func (e *env) guestConfig() host.Config {
	e.t.Helper()
	return e.guestConfigOf(guestbuild.Must(e.t))
}

// guestConfigOf is guestConfig with the guest module wasm (the test
// guest: guestbuild.MustTestHooks).
func (e *env) guestConfigOf(wasm []byte) host.Config {
	e.t.Helper()
	tokens, err := host.HashTokens(tokenSpec)
	require.NoError(e.t, err)
	cfg := e.config()
	cfg.Driver = nil
	cfg.Guest, err = backend.New(context.Background(), backend.Config{Wasm: wasm, CacheDir: guestbuild.CacheDir(),
		Boot: runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: time.Millisecond},
			API: abi.APIConfig{Tokens: tokens}}})
	require.NoError(e.t, err)
	return cfg
}

// openIn opens a host on a fresh env in process or, guest, running each
// tree as a wasm guest: the two modes a test compares.
func openIn(t *testing.T, guest bool) (*env, *host.Host) {
	e := newEnv(t)
	cfg := e.config()
	if guest {
		cfg = e.guestConfig()
	}
	return e, e.open(cfg)
}

// apiServer serves h's API on loopback: with NewGuestHandler when h runs
// guests, with core/api's handler otherwise.
func apiServer(t *testing.T, h *host.Host, guest bool) string {
	return apiServerWith(t, h, guest, api.NewConfig())
}

// apiServerWith is apiServer with the API configured by cfg.
func apiServerWith(t *testing.T, h *host.Host, guest bool, cfg api.Config) string {
	t.Helper()
	auth, err := api.ParseTokens(tokenSpec)
	require.NoError(t, err)
	var handler http.Handler
	if guest {
		g, err := host.NewGuestHandler(h, auth, cfg, nil)
		require.NoError(t, err)
		t.Cleanup(g.Close)
		handler = g
	} else {
		a, err := api.New(api.Deps{Trees: h, Auth: auth, Clock: host.RealClock{}, IDs: &fakehost.IDs{Prefix: "api"}}, cfg)
		require.NoError(t, err)
		t.Cleanup(a.Close)
		handler = nethttp.Handler(a)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

type answer struct {
	Status int
	Type   string // of an error body
	Msg    string
	Allow  string
	Auth   string // WWW-Authenticate
	Body   map[string]any
	raw    string
}

func call(t *testing.T, base, method, path, token, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	if _, q, ok := strings.Cut(path, "?"); ok && strings.Contains(q, "#") {
		// Sent as written: a client that puts a # in the query string
		// (not a fragment, which no client sends).
		req.URL.RawQuery, req.URL.Fragment = q, ""
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{Status: resp.StatusCode, Allow: resp.Header.Get("Allow"), Auth: resp.Header.Get("WWW-Authenticate")}
	a.raw = string(b)
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &a.Body), "%s %s: %s", method, path, b)
		if e, ok := a.Body["error"].(map[string]any); ok {
			a.Type, a.Msg = e["type"].(string), e["message"].(string)
			a.Body = nil
		}
	}
	return a
}

// The host's answers in guest mode are core/api's in process: the same
// statuses, error bodies and headers, for the same requests, including
// auth and the ownership check (another principal's session is 404).
func TestGuestAPIAnswersAsInProcess(t *testing.T) {
	run := func(t *testing.T, guest bool) []answer {
		_, h := openIn(t, guest)
		base := apiServer(t, h, guest)
		var out []answer
		do := func(method, path, token, body string) answer {
			a := call(t, base, method, path, token, body)
			out = append(out, a)
			return a
		}
		do("GET", "/healthz", "", "")
		do("POST", "/v1/sessions", "", `{}`)
		do("POST", "/v1/sessions", "wrong", `{}`)
		do("POST", "/v1/sessions", "alice-token", `{not json`)
		do("POST", "/v1/sessions", "alice-token", `{"config":{"bogus":1}}`)
		do("POST", "/v1/sessions", "alice-token", `null`)
		do("POST", "/v1/sessions", "alice-token", `{"config":{"MODEL":"x"}}`)
		do("POST", "//v1/sessions", "alice-token", `{}`)
		created := do("POST", "/v1/sessions", "alice-token", `{}`)
		require.Equal(t, http.StatusCreated, created.Status)
		id := created.Body["id"].(string)
		list := do("GET", "/v1/sessions", "alice-token", "")
		assert.Len(t, list.Body["sessions"], 1, "failed creates left no tree")
		do("GET", "/v1/sessions", "bob-token", "")
		do("GET", "/v1/sessions?limit=0", "alice-token", "")
		do("GET", "/v1/sessions?cursor=nonsense", "alice-token", "")
		for _, tok := range []string{"", "bob-token"} {
			do("GET", "/v1/sessions/"+id, tok, "")
			do("POST", "/v1/sessions/"+id+"/prompt", tok, `{"text":"hi"}`)
			do("POST", "/v1/sessions/"+id+"/interrupt", tok, "")
			do("GET", "/v1/sessions/"+id+"/questions", tok, "")
			do("DELETE", "/v1/sessions/"+id, tok, "")
			do("GET", "/v1/sessions/"+id+"/events?access_token="+tok, "", "")
		}
		do("GET", "/v1/sessions/nosuch", "alice-token", "")
		do("GET", "/v1/sessions/bad%2Fid", "alice-token", "")
		do("GET", "/v1/sessions/"+id+".child", "alice-token", "")
		do("POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":1}`)
		do("POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":"a","TEXT":"b"}`)
		do("POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":"a","text":"b"}`)
		do("GET", "/v1/sessions/"+id+"?limit=2#x", "alice-token", "")
		do("GET", "/v1/sessions/"+id+"/events?after=99#", "alice-token", "")
		do("GET", "/v1/sessions/"+id+"/..", "alice-token", "")
		do("DELETE", "/v1/sessions/"+id+"/./", "alice-token", "")
		do("POST", "/v1/sessions/"+id+"/permissions/r1", "alice-token", `{"reply":"once","response_id":"x"}`)
		do("PUT", "/v1/sessions/"+id, "alice-token", "")
		do("GET", "/v2/nothing", "alice-token", "")
		do("DELETE", "/v1/sessions/"+id+".child", "alice-token", "")
		do("DELETE", "/v1/sessions/"+id, "alice-token", "")
		do("GET", "/v1/sessions/"+id, "alice-token", "")
		do("DELETE", "/v1/sessions/"+id, "alice-token", "")
		// The tree's id differs between the runs, and so do timestamps:
		// a list shows the root session's created_at, which a guest
		// takes from its own clock, not the test's fake one.
		for i := range out {
			out[i].Msg = strings.ReplaceAll(out[i].Msg, id, "ID")
			out[i].raw = strings.ReplaceAll(out[i].raw, id, "ID")
			out[i].raw = createdAtValue.ReplaceAllString(out[i].raw, `"created_at":T`)
			out[i].Body = nil
		}
		return out
	}
	var inProcess []answer
	t.Run("inprocess", func(t *testing.T) { inProcess = run(t, false) })
	t.Run("guest", func(t *testing.T) {
		got := run(t, true)
		require.Len(t, got, len(inProcess))
		for i := range got {
			assert.Equal(t, inProcess[i], got[i], "request %d: %s", i, got[i].raw)
		}
	})
}

// follow reads the session's event stream (after seq 0) until an event
// of type typ; a stream that never brings it fails the test after 30 s
// instead of hanging it.
func follow(t *testing.T, base, id, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+id+"/events?after=0&access_token=alice-token", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "event: "+typ {
			return
		}
	}
	t.Fatalf("stream ended before %s: %v", typ, sc.Err())
}

// inBothModes runs f as a subtest in process and as a guest, each with a
// fresh env and that mode's host configuration.
func inBothModes(t *testing.T, f func(t *testing.T, e *env, cfg host.Config, guest bool)) {
	for _, guest := range []bool{false, true} {
		t.Run(map[bool]string{false: "inprocess", true: "guest"}[guest], func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config()
			if guest {
				cfg = e.guestConfig()
			}
			f(t, e, cfg, guest)
		})
	}
}

// openStream opens session id's event stream as alice and returns what
// ends it (its request cancelled, its body closed); calling that again does
// nothing.
func openStream(t *testing.T, base, id string) (end func()) {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, "GET", base+"/v1/sessions/"+id+"/events?access_token=alice-token", nil)
	require.NoError(t, err)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	if stream.StatusCode != http.StatusOK {
		cancel()
		stream.Body.Close()
		require.Equal(t, http.StatusOK, stream.StatusCode)
	}
	return func() {
		cancel()
		stream.Body.Close()
	}
}

func create(t *testing.T, base string) string {
	t.Helper()
	a := call(t, base, "POST", "/v1/sessions", "alice-token", `{}`)
	require.Equal(t, http.StatusCreated, a.Status)
	return a.Body["id"].(string)
}

// In guest mode the host keeps its guarantees: a guest's wake-up is a
// durable row before the claim it covers commits, a graceful Close keeps
// it, the next Open boots exactly the trees with a row (and the turn
// resumes there), an idle tree is evicted and booted again on use, one
// with a claim is not, and Delete removes files and rows.
func TestGuestHostWakeupsEvictionDelete(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfig())
	base := apiServer(t, h, true)
	quiet, busy := create(t, base), create(t, base)
	assert.Empty(t, e.wakeups(), "no work, no wake-up")
	a := call(t, base, "POST", "/v1/sessions/"+busy+"/prompt", "alice-token", `{"text":"/sleep 30s\nslow"}`)
	require.Equal(t, http.StatusAccepted, a.Status)
	assert.Contains(t, e.wakeups(), busy, "stored before the 202")

	e.clock.Advance(time.Minute)
	assert.Equal(t, 1, h.EvictIdle(ctx), "the quiet tree; the busy one has a claim")
	st := h.Stats()
	assert.Equal(t, 1, st.Instances)
	assert.Equal(t, int64(1), st.Evictions)
	assert.Equal(t, http.StatusOK, call(t, base, "GET", "/v1/sessions/"+quiet, "alice-token", "").Status)
	assert.Equal(t, int64(3), h.Stats().Boots, "booted again on use")

	require.NoError(t, h.Close(ctx))
	assert.Contains(t, e.wakeups(), busy, "Close keeps the row")

	h2 := e.open(e.guestConfig())
	assert.Equal(t, []string{busy}, e.bootedIDs(), "only the tree with a wake-up row")
	assert.Equal(t, 1, h2.Stats().BootedAtOpen)
	base2 := apiServer(t, h2, true)
	a = call(t, base2, "POST", "/v1/sessions/"+busy+"/interrupt", "alice-token", "")
	require.Equal(t, http.StatusOK, a.Status)
	assert.Equal(t, true, a.Body["interrupted"], "the turn resumed after the restart")

	require.Equal(t, http.StatusNoContent, call(t, base2, "DELETE", "/v1/sessions/"+busy, "alice-token", "").Status)
	assert.False(t, exists(e.treePath(busy)))
	assert.False(t, exists(e.treePath(busy)+"-wal"))
	assert.NotContains(t, e.wakeups(), busy)
	a = call(t, base2, "GET", "/v1/sessions", "alice-token", "")
	assert.Len(t, a.Body["sessions"], 1)

	// A turn runs to its end in the guest; its events stream from it.
	p := call(t, base2, "POST", "/v1/sessions/"+quiet+"/prompt", "alice-token", `{"text":"hello"}`)
	require.Equal(t, http.StatusAccepted, p.Status)
	follow(t, base2, quiet, "session.execution.succeeded@1")
}

// quietServer serves h's guest API on loopback; quiet(n) waits until at most
// n requests are being handled (the others' handlers, and the host's hold
// on their trees, have returned).
func quietServer(t *testing.T, h *host.Host) (string, func(n int)) {
	t.Helper()
	auth, err := api.ParseTokens(tokenSpec)
	require.NoError(t, err)
	g, err := host.NewGuestHandler(h, auth, api.NewConfig(), nil)
	require.NoError(t, err)
	t.Cleanup(g.Close)
	var mu sync.Mutex
	active := 0
	finished := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		active++
		mu.Unlock()
		defer func() {
			mu.Lock()
			active--
			mu.Unlock()
			select {
			case finished <- struct{}{}:
			default:
			}
		}()
		g.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	quiet := func(most int) {
		t.Helper()
		for {
			mu.Lock()
			n := active
			mu.Unlock()
			if n <= most {
				return
			}
			select {
			case <-finished:
			case <-time.After(30 * time.Second):
				t.Fatalf("%d requests still handled", n)
			}
		}
	}
	return srv.URL, quiet
}

// A guest tree is evicted as an in-process one is: once no execution runs
// in it and no request is in flight, although the wake-up armed for its
// last turn is still pending (that wake-up boots it again, and finds
// nothing to do). A tree whose turn runs, or with an open event stream,
// stays.
func TestGuestTreeEvictedAfterItsLastTurn(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfig())
	base, quiet := quietServer(t, h)
	done, running, watched := create(t, base), create(t, base), create(t, base)
	p := call(t, base, "POST", "/v1/sessions/"+done+"/prompt", "alice-token", `{"text":"hello"}`)
	require.Equal(t, http.StatusAccepted, p.Status)
	follow(t, base, done, "session.execution.succeeded@1")
	p = call(t, base, "POST", "/v1/sessions/"+running+"/prompt", "alice-token", `{"text":"/sleep 30s\nslow"}`)
	require.Equal(t, http.StatusAccepted, p.Status)
	endStream := openStream(t, base, watched)
	defer endStream()

	quiet(1) // all but the stream
	rows := e.wakeups()
	require.Contains(t, rows, done, "the wake-up armed for the turn is still pending")
	require.Contains(t, rows, running)
	e.clock.Advance(time.Minute)
	require.Equal(t, 1, h.EvictIdle(ctx), "the tree whose turn ended; not the running one nor the watched one")
	assert.Contains(t, e.wakeups(), done, "eviction keeps the wake-up row")
	assert.Equal(t, 2, h.Stats().Instances)

	endStream()
	quiet(0)
	e.clock.Advance(time.Minute)
	assert.Equal(t, 1, h.EvictIdle(ctx), "the watched tree, once its stream closed")
	assert.Equal(t, 1, h.Stats().Instances, "the running turn keeps its tree")
	assert.Equal(t, http.StatusOK, call(t, base, "GET", "/v1/sessions/"+done, "alice-token", "").Status, "booted again on use")
}

// Another principal's requests on a tree that is not running are 404 and
// boot nothing, in process as in guest mode: its epoch and its events stay
// as they were (the owner is read from the index before any boot).
func TestForeignRequestsNeverBootATree(t *testing.T) {
	inBothModes(t, func(t *testing.T, e *env, cfg host.Config, guest bool) {
		h := e.open(cfg)
		base := apiServer(t, h, guest)
		created := call(t, base, "POST", "/v1/sessions", "alice-token", `{}`)
		require.Equal(t, http.StatusCreated, created.Status)
		id := created.Body["id"].(string)
		e.clock.Advance(time.Hour)
		require.Equal(t, 1, h.EvictIdle(ctx))
		epoch, events := e.epochAndEvents(id)
		booted := e.bootedIDs()

		s := "/v1/sessions/" + id
		for _, rq := range []struct{ method, path, body string }{
			{"GET", s, ""},
			{"POST", s + "/prompt", `{"text":"hi"}`},
			{"POST", s + "/interrupt", ""},
			{"GET", s + "/events", ""},
			{"GET", s + "/questions", ""},
			{"POST", s + "/permissions/r1", `{"reply":"once","response_id":"x"}`},
			{"DELETE", s, ""},
		} {
			a := call(t, base, rq.method, rq.path, "bob-token", rq.body)
			assert.Equal(t, http.StatusNotFound, a.Status, "%s %s", rq.method, rq.path)
			assert.Equal(t, string(api.ErrNotFound), a.Type, "%s %s", rq.method, rq.path)
		}
		assert.Equal(t, booted, e.bootedIDs(), "bob's requests booted a tree")
		gotEpoch, gotEvents := e.epochAndEvents(id)
		assert.Equal(t, epoch, gotEpoch)
		assert.Equal(t, events, gotEvents)
	})
}

// epochAndEvents reads a tree's epoch and its number of events.
func (e *env) epochAndEvents(id string) (epoch, events int64) {
	e.t.Helper()
	read(e.t, e.treePath(id), func(tx storage.Tx) error {
		if _, err := storage.QueryRow(tx, `SELECT epoch FROM tree`, nil, &epoch); err != nil {
			return err
		}
		_, err := storage.QueryRow(tx, `SELECT count(*) FROM events`, nil, &events)
		return err
	})
	return epoch, events
}

// The Host and Origin checks answer alike in process and in guest mode,
// before anything reaches a guest; an allowed origin's request reaches
// the guest and is served there (the host checked its Origin), with the
// CORS headers the host set.
func TestGuestChecksHostAndOriginAsInProcess(t *testing.T) {
	const console = "https://console.example"
	type sourced struct {
		Status      int
		Type        string
		AllowOrigin string
		Expose      string // Access-Control-Expose-Headers
	}
	run := func(t *testing.T, guest bool) []sourced {
		_, h := openIn(t, guest)
		base := apiServerWith(t, h, guest, api.NewConfig().WithLoopbackOnly(true).WithAllowedOrigins(console))
		created := call(t, base, "POST", "/v1/sessions", "alice-token", `{}`)
		require.Equal(t, http.StatusCreated, created.Status)
		id := created.Body["id"].(string)
		var out []sourced
		for _, rq := range []struct{ method, path, host, origin, body string }{
			{"GET", "/v1/sessions/" + id, "rebind.attacker.example:8787", "", ""},
			{"POST", "/v1/sessions", "rebind.attacker.example:8787", "", "{}"},
			{"POST", "/v1/sessions/" + id + "/prompt", "rebind.attacker.example", "", `{"text":"hi"}`},
			{"GET", "/healthz", "rebind.attacker.example", "", ""},
			{"POST", "/v1/sessions", "", "https://evil.example", "{}"},
			{"POST", "/v1/sessions/" + id + "/prompt", "", "https://evil.example", `{"text":"hi"}`},
			{"GET", "/v1/sessions/" + id + "/questions", "", "null", ""},
			{"DELETE", "/v1/sessions/" + id, "", "https://evil.example", ""},
			{"GET", "/v1/sessions/" + id, "localhost:1", console, ""},
			{"POST", "/v1/sessions/" + id + "/prompt", "[::1]:1", console, `{"text":"hi"}`},
			{"OPTIONS", "/v1/sessions/" + id + "/prompt", "", console, ""},
		} {
			req, err := http.NewRequest(rq.method, base+rq.path, strings.NewReader(rq.body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer alice-token")
			req.Header.Set("Content-Type", "text/plain")
			if rq.host != "" {
				req.Host = rq.host
			}
			if rq.origin != "" {
				req.Header.Set("Origin", rq.origin)
			}
			if rq.method == "OPTIONS" {
				req.Header.Set("Access-Control-Request-Method", "POST")
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			got := sourced{Status: resp.StatusCode, AllowOrigin: resp.Header.Get("Access-Control-Allow-Origin"), Expose: resp.Header.Get("Access-Control-Expose-Headers")}
			var e api.ErrorBody
			if json.Unmarshal(b, &e) == nil {
				got.Type = string(e.Error.Type)
			}
			out = append(out, got)
		}
		list := call(t, base, "GET", "/v1/sessions", "alice-token", "")
		assert.Len(t, list.Body["sessions"], 1, "refused creates created nothing")
		return out
	}
	want := []sourced{
		{403, "forbidden_host", "", ""}, {403, "forbidden_host", "", ""}, {403, "forbidden_host", "", ""}, {403, "forbidden_host", "", ""},
		{403, "forbidden_origin", "", ""}, {403, "forbidden_origin", "", ""}, {403, "forbidden_origin", "", ""}, {403, "forbidden_origin", "", ""},
		// A page may read a 429's or 503's Retry-After, whoever answers.
		{200, "", console, "Retry-After"}, {202, "", console, "Retry-After"}, {204, "", console, "Retry-After"},
	}
	t.Run("inprocess", func(t *testing.T) { assert.Equal(t, want, run(t, false)) })
	t.Run("guest", func(t *testing.T) { assert.Equal(t, want, run(t, true)) })
}

// What the host answers itself when it fails (here: it has closed) is
// answered as in process, create included: the guest handler writes the
// error with api.WriteError, as the in-process handler does.
func TestGuestAnswersHostFailuresAsInProcess(t *testing.T) {
	run := func(t *testing.T, guest bool) []answer {
		_, h := openIn(t, guest)
		base := apiServer(t, h, guest)
		id := create(t, base)
		require.NoError(t, h.Close(ctx))
		var out []answer
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/v1/sessions", `{}`},
			{"GET", "/v1/sessions", ""},
			{"GET", "/v1/sessions/" + id, ""},
			{"POST", "/v1/sessions/" + id + "/prompt", `{"text":"hi"}`},
			{"DELETE", "/v1/sessions/" + id, ""},
		} {
			a := call(t, base, rq.method, rq.path, "alice-token", rq.body)
			assert.Equal(t, http.StatusServiceUnavailable, a.Status, "%s %s: %s", rq.method, rq.path, a.raw)
			out = append(out, a)
		}
		return out
	}
	var inProcess []answer
	t.Run("inprocess", func(t *testing.T) { inProcess = run(t, false) })
	t.Run("guest", func(t *testing.T) { assert.Equal(t, inProcess, run(t, true)) })
}

// createdAtValue matches a created_at field's value in an answer.
var createdAtValue = regexp.MustCompile(`"created_at":\d+`)
