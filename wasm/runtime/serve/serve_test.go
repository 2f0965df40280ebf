package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// compiledGuest is a guest compiled once per test binary.
type compiledGuest struct {
	once   sync.Once
	module *runtime.Module
	err    error
}

var (
	guest     compiledGuest // the guest users run
	testGuest compiledGuest // the test guest, with its test hooks (guestbuild.MustTestHooks)
)

func (c *compiledGuest) compile(t *testing.T, wasm func(guestbuild.TB) []byte) *runtime.Module {
	t.Helper()
	b := wasm(t)
	c.once.Do(func() {
		c.module, c.err = runtime.Compile(context.Background(), b, runtime.CompileOptions{CacheDir: guestbuild.CacheDir()})
	})
	require.NoError(t, c.err)
	return c.module
}

func startTree(t *testing.T, cfg serve.Config) *httptest.Server {
	t.Helper()
	srv, _ := startTreeWatched(t, cfg)
	return srv
}

// watched counts the requests the tree's server is handling.
type watched struct {
	tree     *serve.Tree
	db       *sqlitedb.DB // the tree's database
	mu       sync.Mutex
	active   int
	finished chan struct{} // signalled after each request's handler returned
}

func (w *watched) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	w.active++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.active--
		w.mu.Unlock()
		select {
		case w.finished <- struct{}{}:
		default:
		}
	}()
	w.tree.ServeHTTP(rw, r)
}

// quiet waits until no handler runs: every request the client ended has
// been seen off by the tree.
func (w *watched) quiet(t *testing.T) {
	t.Helper()
	for {
		w.mu.Lock()
		n := w.active
		w.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-w.finished:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d requests still handled", n)
		}
	}
}

func startTreeWatched(t *testing.T, cfg serve.Config) (*httptest.Server, *watched) {
	t.Helper()
	return startTreeOf(t, guest.compile(t, guestbuild.Must), cfg)
}

// startTreeOf is startTreeWatched with the guest m.
func startTreeOf(t *testing.T, m *runtime.Module, cfg serve.Config) (*httptest.Server, *watched) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "tree.db"), sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	cfg.Module, cfg.Conn = m, db.Conn()
	if cfg.ArmWake == nil {
		cfg.ArmWake = func(int64) error { return nil } // no host: the tests deliver no wake-up
	}
	cfg.Boot.TreeID = "tree1"
	tree, err := serve.Start(ctx, cfg)
	require.NoError(t, err)
	w := &watched{tree: tree, db: db, finished: make(chan struct{}, 1)}
	srv := httptest.NewServer(w)
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, tree.Close(ctx))
	})
	return srv, w
}

// client bounds every plain request of these tests, so a response that
// never comes fails the test instead of hanging it (event streams have
// their own contexts).
var client = &http.Client{Timeout: 30 * time.Second}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// openEvents opens the session's event stream for as long as ctx lasts;
// the caller closes the body.
func openEvents(ctx context.Context, t *testing.T, srv *httptest.Server) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/sessions/tree1/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// waitFor reads the session's event stream until an event of type typ.
func waitFor(t *testing.T, srv *httptest.Server, typ string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := openEvents(ctx, t, srv)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var seen []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			seen = append(seen, name)
			if name == typ {
				return seen
			}
		}
	}
	t.Fatalf("stream ended before %s: %v (%v)", typ, seen, sc.Err())
	return nil
}

func TestServeOfflineTurnStreams(t *testing.T) {
	srv := startTree(t, serve.Config{Boot: runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: 5 * time.Millisecond}}})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"streamed over real timers"}`).StatusCode)
	seen := waitFor(t, srv, "session.execution.succeeded@1")
	require.Contains(t, seen, "session.text.delta@1", "deltas stream live")
}

// The host's logger names the tree; a line of the driver's or the guest's
// names it once, not once per layer.
func TestServeLogsNameTheTreeOnce(t *testing.T) {
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("tree", "tree1")
	srv := startTree(t, serve.Config{Log: log, Boot: runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: time.Millisecond}}})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"logged"}`).StatusCode)
	waitFor(t, srv, "session.execution.succeeded@1")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.NotEmpty(t, lines)
	for _, line := range lines {
		assert.Equal(t, 1, strings.Count(line, "tree=tree1"), line)
	}
}

func TestServeModelEgress(t *testing.T) {
	var auth string
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/event-stream")
		for _, word := range []string{"Hello", " from", " the", " provider"} {
			fmt.Fprintf(w, "data: %s\n\n", mustJSON(map[string]any{"choices": []any{map[string]any{"delta": map[string]any{"content": word}}}}))
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer provider.Close()
	srv := promptThroughProvider(t, provider.URL)
	waitFor(t, srv, "session.execution.succeeded@1")
	require.Equal(t, "Bearer sk-test", auth, "the host adds the key")

	resp, err := client.Get(srv.URL + "/v1/sessions/tree1")
	require.NoError(t, err)
	defer resp.Body.Close()
	var snap struct {
		Messages []struct{ Text string } `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	require.Equal(t, "Hello from the provider", snap.Messages[len(snap.Messages)-1].Text)
}

// TestServeModelEgressNoRedirect: a provider's redirect is the guest
// model's answer (a permanent error), never followed: the key is not sent
// where it points, even on the same host name.
func TestServeModelEgressNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer provider.Close()
	srv := promptThroughProvider(t, provider.URL)
	waitFor(t, srv, "session.execution.failed@1")
	require.Zero(t, elsewhere.Load(), "the redirect was not followed")
}

// promptThroughProvider serves a tree whose model is the OpenAI-compatible
// provider at baseURL (key sk-test, added by the host), creates its
// session and sends it one prompt.
func promptThroughProvider(t *testing.T, baseURL string) *httptest.Server {
	t.Helper()
	srv := startTree(t, serve.Config{
		Boot:  runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: baseURL + "/v1", Name: "m"}},
		Model: serve.ModelEgress{APIKey: "sk-test"},
	})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"hi"}`).StatusCode)
	return srv
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func offline() runtime.BootConfig {
	return runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: 5 * time.Millisecond}}
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func idle(t *testing.T, tree *serve.Tree) bool {
	t.Helper()
	ok, err := tree.Idle(context.Background())
	require.NoError(t, err)
	return ok
}

// A tree is idle when no execution runs in its guest and no request is in
// flight; a claim left for the wake-up does not keep it busy.
func TestServeIdle(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.True(t, idle(t, w.tree), "booted, nothing to do")
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	w.quiet(t)
	require.True(t, idle(t, w.tree))

	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"/sleep 30s\nslow"}`).StatusCode)
	w.quiet(t)
	require.False(t, idle(t, w.tree), "the turn sleeps in the guest")
	require.Equal(t, 200, post(t, srv.URL+"/v1/sessions/tree1/interrupt", ``).StatusCode)
	waitFor(t, srv, "session.execution.interrupted@1")
	w.quiet(t)
	require.True(t, idle(t, w.tree), "the turn ended")

	// An event stream is a request in flight until its client goes away.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // on a failure too: the server's Close waits for the stream
	resp := openEvents(ctx, t, srv)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.False(t, idle(t, w.tree), "an event stream is open")
	cancel()
	resp.Body.Close()
	w.quiet(t)
	require.True(t, idle(t, w.tree))
	require.Equal(t, 0, serve.Requests(w.tree))
}

// A tree delivers no wake-up of its own: the host that keeps them
// (ArmWake) delivers each, once. Were the tree to deliver them too, every
// wake would re-arm (the claim lasts past 1 ms) and ArmWake hear more.
func TestServeDeliversNoWakeUp(t *testing.T) {
	var mu sync.Mutex
	arms := 0
	boot := offline()
	// Re-armed by every wake while the claim lasts: the shortest interval
	// allowed, so several wake-ups would be due within the turn's sleep.
	boot.Settings.WakeInterval = settings.MinWakeInterval
	srv, w := startTreeWatched(t, serve.Config{Boot: boot, ArmWake: func(at int64) error {
		mu.Lock()
		defer mu.Unlock()
		if at != 0 {
			arms++
		}
		return nil
	}})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"/sleep 500ms\nslow"}`).StatusCode)
	waitFor(t, srv, "session.execution.succeeded@1")
	w.quiet(t)
	mu.Lock()
	n := arms
	mu.Unlock()
	require.Equal(t, 1, n, "armed with the claim, and no wake-up was delivered")
	require.NoError(t, w.tree.Wake(context.Background()), "the host delivers it")

	_, err := serve.Start(context.Background(), serve.Config{Module: &runtime.Module{}, Conn: nopConn{}})
	require.ErrorContains(t, err, "ArmWake is required")
}

// A client that goes away after its guest died cancels nothing: no guest is
// booted just for that. The next real use boots one.
func TestServeCancelBootsNoGuest(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	ctx, cancel := context.WithCancel(context.Background())
	resp := openEvents(ctx, t, srv)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, 1, serve.Generation(w.tree))

	require.NoError(t, serve.Guest(w.tree).Close(context.Background()), "the guest dies")
	cancel()
	resp.Body.Close()
	w.quiet(t)
	require.Equal(t, 1, serve.Generation(w.tree), "the cancel booted no guest")
	require.Equal(t, 0, serve.Requests(w.tree))
	require.True(t, idle(t, w.tree), "nothing runs without a guest")

	require.Equal(t, 200, get(t, srv.URL+"/v1/sessions/tree1").StatusCode)
	require.Equal(t, 2, serve.Generation(w.tree), "the next request boots one")
}

// A request the guest refuses without dying is forgotten and answered
// 500 in the API's error format; the guest serves on.
func TestServeRefusedRequest(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	serve.SetRequest(w.tree, func(*runtime.Guest, uint64, runtime.Request) error {
		return &runtime.GuestError{Export: abi.ExportRequest, Msg: "request: malformed"}
	})
	resp := get(t, srv.URL+"/v1/sessions/tree1")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var body api.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, api.ErrInternal, body.Error.Type)
	require.Equal(t, "internal error", body.Error.Message, "the detail is logged, not sent")
	w.quiet(t)
	require.Equal(t, 0, serve.Requests(w.tree), "the refused request is not tracked")

	serve.SetRequest(w.tree, nil)
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 1, serve.Generation(w.tree), "the same guest serves on")
}

// nopConn is a Conn for a Start that must fail before using it.
type nopConn struct{ runtime.Conn }

// lockedBuffer collects log lines written from the guest's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
