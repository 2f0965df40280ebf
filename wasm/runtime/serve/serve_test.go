package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/host/sqlitedb"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

var (
	moduleOnce sync.Once
	module     *runtime.Module
	moduleErr  error
)

func startTree(t *testing.T, cfg serve.Config) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	wasm := guestbuild.Must(t)
	moduleOnce.Do(func() {
		module, moduleErr = runtime.Compile(ctx, wasm, runtime.CompileOptions{CacheDir: guestbuild.CacheDir()})
	})
	require.NoError(t, moduleErr)
	m := module
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "tree.db"), sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	cfg.Module, cfg.Conn = m, db.Conn()
	cfg.Boot.TreeID = "tree1"
	tree, err := serve.Start(ctx, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(tree)
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, tree.Close(ctx))
	})
	return srv
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// waitFor reads the session's event stream until an event of type typ.
func waitFor(t *testing.T, srv *httptest.Server, typ string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/sessions/tree1/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
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
	srv := startTree(t, serve.Config{
		Boot:  runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: provider.URL + "/v1", Name: "m"}},
		Model: serve.ModelEgress{APIKey: "sk-test"},
	})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"hi"}`).StatusCode)
	waitFor(t, srv, "session.execution.succeeded@1")
	require.Equal(t, "Bearer sk-test", auth, "the host adds the key")

	resp, err := http.Get(srv.URL + "/v1/sessions/tree1")
	require.NoError(t, err)
	defer resp.Body.Close()
	var snap struct {
		Messages []struct{ Text string } `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	require.Equal(t, "Hello from the provider", snap.Messages[len(snap.Messages)-1].Text)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
