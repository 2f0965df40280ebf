package api_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/internal/treetest"
)

// largeLog is a tree whose session's log holds ~3.6 MB: six prompts of
// 200 KiB, each in its admission, its user message and its echo.
func largeLog(t *testing.T) (*fixture, string) {
	f := newFixtureWith(t, treetest.NewDriver(16), nil, api.NewConfig())
	alice := f.client(t, "")
	id := alice.create()
	for i := range 6 {
		text := strings.Repeat(strconv.Itoa(i%10), 200<<10)
		require.Equal(t, http.StatusAccepted, alice.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"`+text+`"}`, nil))
	}
	f.trees.tree(id).node.Idle()
	return f, id
}

// pageWriter records an event stream's pages: the bytes written between
// two flushes, and the Drain calls between them (httpmsg.Drainer).
type pageWriter struct {
	header httpmsg.Header
	want   []byte        // the frame line that ends the catch-up
	done   chan struct{} // closed once want was written

	mu      sync.Mutex
	body    bytes.Buffer
	pending int   // bytes written since the last flush
	pages   []int // bytes of each flushed page
	drains  []int // len(pages) at each Drain
}

func (w *pageWriter) Header() httpmsg.Header { return w.header }
func (w *pageWriter) WriteHeader(int)        {}
func (w *pageWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending += len(p)
	return w.body.Write(p)
}

func (w *pageWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending > 0 {
		w.pages = append(w.pages, w.pending)
	}
	w.pending = 0
	if bytes.Contains(w.body.Bytes(), w.want) {
		select {
		case <-w.done:
		default:
			close(w.done)
		}
	}
}

func (w *pageWriter) Drain(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drains = append(w.drains, len(w.pages))
	return nil
}

// An event stream's catch-up reads, sends and flushes the log in pages
// bounded in bytes, and on a writer that can drain waits for each page
// to be taken before it reads the next: a log of large events is never
// held whole (on a Durable Object, in a 128 MB isolate).
func TestEventCatchUpIsPagedInBytes(t *testing.T) {
	f, id := largeLog(t)
	var snap struct{ Cursor int64 }
	require.Equal(t, http.StatusOK, f.client(t, "").do("GET", "/v1/sessions/"+id+"?limit=1", "", &snap))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := httpmsg.NewRequest(ctx, "GET", "http://127.0.0.1/v1/sessions/"+id+"/events", nil)
	require.NoError(t, err)
	w := &pageWriter{header: httpmsg.Header{}, want: []byte("id: " + strconv.FormatInt(snap.Cursor, 10) + "\n"), done: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		f.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("the catch-up never sent the log's last event")
	}
	cancel()
	<-served

	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	for _, p := range w.pages {
		assert.Less(t, p, 3<<19, "a page of the catch-up is about 1 MiB, not the log's %d bytes", w.body.Len())
		total += p
	}
	assert.Greater(t, total, 3<<20, "the whole log was sent")
	require.GreaterOrEqual(t, len(w.pages), 3)
	var between []int
	for i := 1; i < len(w.pages); i++ {
		between = append(between, i)
	}
	assert.Equal(t, between, w.drains, "each page but the last was drained before the next was read")
}
