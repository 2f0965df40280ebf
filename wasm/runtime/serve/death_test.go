package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// A guest that dies takes its requests with it: an event stream it was
// serving ends (its client reconnects to the next guest) as soon as the
// tree learns of the death, at the next use, rather than hanging open
// on a guest that will never write to it again.
func TestServeGuestDeathEndsItsStreams(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // fails rather than hangs
	defer cancel()
	stream := openEvents(ctx, t, srv)
	defer stream.Body.Close()
	require.Equal(t, 200, stream.StatusCode)

	require.NoError(t, serve.Guest(w.tree).Close(context.Background()), "the guest dies")
	require.Equal(t, 200, get(t, srv.URL+"/v1/sessions/tree1").StatusCode, "the next use boots a fresh guest")
	require.Equal(t, 2, serve.Generation(w.tree))
	_, _ = io.ReadAll(stream.Body)
	require.NoError(t, ctx.Err(), "the dead guest's stream did not end")
	w.quiet(t)
	require.Equal(t, 0, serve.Requests(w.tree))
}

// A request the guest refuses without dying ends only itself: the other
// requests the guest serves (an open event stream) go on.
func TestServeRefusedRequestLeavesTheOthers(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := openEvents(ctx, t, srv)
	defer stream.Body.Close()
	require.Equal(t, 200, stream.StatusCode)
	require.Equal(t, 1, serve.Requests(w.tree))

	serve.SetRequest(w.tree, func(*runtime.Guest, uint64, runtime.Request) error {
		return &runtime.GuestError{Export: abi.ExportRequest, Msg: "request: malformed"}
	})
	require.Equal(t, http.StatusInternalServerError, get(t, srv.URL+"/v1/sessions/tree1").StatusCode)
	require.Equal(t, 1, serve.Requests(w.tree), "the stream is still served")
	require.Equal(t, 1, serve.Generation(w.tree))
}

// A client whose connection fails a write is gone: the tree cancels its
// request in the guest, so nothing is left tracked (the tree can be idle).
func TestServeFailedWriteForgetsTheRequest(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	done := serveStream(context.Background(), w.tree, &brokenWriter{header: http.Header{}}, "")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream was not given up after its write failed")
	}
	require.Equal(t, 0, serve.Requests(w.tree), "the request is cancelled in the guest")
	require.True(t, idle(t, w.tree))
}

// brokenWriter is a connection that fails every write.
type brokenWriter struct{ header http.Header }

func (w *brokenWriter) Header() http.Header       { return w.header }
func (w *brokenWriter) WriteHeader(int)           {}
func (w *brokenWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset") }

// A model call in flight when its guest dies is cut: the provider sees
// its request cancelled once the tree learns of the death, instead of
// streaming on (and being paid for) to nobody.
func TestServeGuestDeathCancelsItsModelCall(t *testing.T) {
	url, asked, cut := stallingProvider(t)
	srv, w := startTreeWatched(t, serve.Config{
		Boot:  runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: url + "/v1", Name: "m"}},
		Model: serve.ModelEgress{APIKey: "sk-test"},
	})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"hi"}`).StatusCode)
	await(t, asked, "the model was not called")

	require.NoError(t, serve.Guest(w.tree).Close(context.Background()), "the guest dies")
	require.Equal(t, 200, get(t, srv.URL+"/v1/sessions/tree1").StatusCode, "the next use boots a fresh guest")
	await(t, cut, "the dead guest's model call goes on")
}

// stallingProvider is a model provider that answers every call with the
// head of an event stream and then nothing until the call is cut; asked
// hears of each call, cut of each cut. Call it before the tree starts:
// it stops after the tree's Close, which cuts the calls still open.
func stallingProvider(t *testing.T) (url string, asked, cut <-chan struct{}) {
	askedc, cutc := make(chan struct{}, 8), make(chan struct{}, 8)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		askedc <- struct{}{}
		<-r.Context().Done()
		cutc <- struct{}{}
	}))
	t.Cleanup(provider.Close)
	return provider.URL, askedc, cutc
}

// await waits for ch, failing the test with msg after 30 s.
func await(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}

// A guest that dies as it is handed a request has answered nothing: the
// client is told the instance stopped (503 unavailable, try again), not
// that the server failed.
func TestServeGuestDeadBeforeAnsweringIsUnavailable(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	serve.SetRequest(w.tree, func(g *runtime.Guest, _ uint64, _ runtime.Request) error {
		_ = g.Close(context.Background())
		return errors.New("trap")
	})
	resp := get(t, srv.URL+"/v1/sessions/tree1")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	var body api.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, api.ErrUnavailable, body.Error.Type)
}

// Close is graceful: a turn running in the guest records that it was
// stopped by a shutdown (interrupted{shutdown}, its claim kept for the
// next boot), as an in-process instance's Close does.
func TestServeCloseRecordsTheShutdown(t *testing.T) {
	srv, w := startTreeWatched(t, serve.Config{Boot: offline()})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"/sleep 30s\nslow"}`).StatusCode)
	w.quiet(t)
	require.False(t, idle(t, w.tree), "the turn sleeps in the guest")

	require.NoError(t, w.tree.Close(context.Background()))
	var reasons []string
	require.NoError(t, w.db.Tx(context.Background(), func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT data FROM events WHERE session_id = 'tree1' AND type = 'session.execution.interrupted@1'`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var data string
			if err := rows.Scan(&data); err != nil {
				return err
			}
			reasons = append(reasons, data)
		}
		return nil
	}))
	require.Len(t, reasons, 1)
	require.Contains(t, reasons[0], `"shutdown"`)
}

// An interrupt cuts the turn's model call on the host too: the guest
// cancels its egress and the provider sees its request cancelled, rather
// than streaming on to nobody.
func TestServeInterruptCancelsTheModelCall(t *testing.T) {
	url, asked, cut := stallingProvider(t)
	srv := promptThroughProvider(t, url)
	await(t, asked, "the model was not called")
	require.Equal(t, 200, post(t, srv.URL+"/v1/sessions/tree1/interrupt", ``).StatusCode)
	await(t, cut, "the interrupted turn's model call goes on")
}
