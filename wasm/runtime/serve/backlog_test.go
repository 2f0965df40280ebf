package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// bigLog gives the tree's session a log of about 5 MB (prompts of 200 KB,
// each echoed back) and returns its last seq, read by a client that reads.
func bigLog(t *testing.T, srv *httptest.Server) (last int64, size int) {
	t.Helper()
	const prompts = 5
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	text := strings.Repeat("x", 200_000)
	for range prompts {
		require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"`+text+`"}`).StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := openEvents(ctx, t, srv)
	defer resp.Body.Close()
	succeeded := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		size += len(sc.Bytes()) + 1
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			last, _ = strconv.ParseInt(id, 10, 64)
		}
		if line == "event: session.execution.succeeded@1" {
			if succeeded++; succeeded == prompts {
				return last, size
			}
		}
	}
	t.Fatalf("stream ended after %d turns: %v", succeeded, sc.Err())
	return 0, 0
}

// blockUntil is clock.BlockUntil(n), failing the test if the timers do
// not come within 30 s instead of hanging it.
func blockUntil(t *testing.T, clock *fakehost.Clock, n int) {
	t.Helper()
	armed := make(chan struct{})
	go func() {
		clock.BlockUntil(n)
		close(armed)
	}()
	select {
	case <-armed:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d timers pending, want %d", clock.Pending(), n)
	}
}

// gatedWriter is an event stream's client that takes a write only when the
// test lets it: each Write announces itself on asked, waits for a token
// on gate, and says on took that it wrote.
type gatedWriter struct {
	header http.Header
	asked  chan struct{}
	gate   chan struct{} // one token per write let through; closed: all
	took   chan struct{}
	mu     sync.Mutex
	buf    bytes.Buffer
}

func newGatedWriter() *gatedWriter {
	return &gatedWriter{header: http.Header{}, asked: make(chan struct{}, 1), gate: make(chan struct{}), took: make(chan struct{}, 1)}
}

func (w *gatedWriter) Header() http.Header { return w.header }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Flush()              {}

func (w *gatedWriter) Write(b []byte) (int, error) {
	select {
	case w.asked <- struct{}{}:
	default:
	}
	<-w.gate
	w.mu.Lock()
	n, err := w.buf.Write(b)
	w.mu.Unlock()
	select {
	case w.took <- struct{}{}:
	default:
	}
	return n, err
}

func (w *gatedWriter) written() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// ids are the seqs of the complete events in an event stream's bytes.
func ids(t *testing.T, stream string) []int64 {
	t.Helper()
	var out []int64
	events := strings.Split(stream, "\n\n")
	for _, ev := range events[:len(events)-1] { // the last is incomplete, or empty
		for _, line := range strings.Split(ev, "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				n, err := strconv.ParseInt(id, 10, 64)
				require.NoError(t, err)
				out = append(out, n)
			}
		}
	}
	return out
}

// complete reports whether stream holds event seq whole.
func complete(stream string, seq int64) bool {
	i := strings.Index(stream, fmt.Sprintf("\nid: %d\n", seq))
	return i >= 0 && strings.Contains(stream[i:], "\n\n")
}

// requireGapless checks seqs are from, from+1, … through to.
func requireGapless(t *testing.T, seqs []int64, from, to int64) {
	t.Helper()
	require.NotEmpty(t, seqs)
	for i, seq := range seqs {
		require.Equal(t, from+int64(i), seq, "seq %d of %d", i, len(seqs))
	}
	require.Equal(t, to, seqs[len(seqs)-1])
}

// serveStream serves the session's event stream to w in the background;
// the returned channel is closed when the handler returns.
func serveStream(ctx context.Context, tree *serve.Tree, w http.ResponseWriter, after string) <-chan struct{} {
	r := httptest.NewRequest("GET", "/v1/sessions/tree1/events", nil).WithContext(ctx)
	if after != "" {
		r.Header.Set("Last-Event-ID", after)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tree.ServeHTTP(w, r)
	}()
	return done
}

// A client that reads nothing of a log much larger than the backlog limit
// makes the host hold about a page of it (the guest's catch-up waits for
// the client), not the log; once it has taken nothing for the patience its
// stream is cut and ends, what waited is dropped, and its reconnection
// with Last-Event-ID gets the rest, gaplessly.
func TestServeStalledStreamBounded(t *testing.T) {
	srv, wt := startTreeWatched(t, serve.Config{Boot: offline()})
	last, size := bigLog(t, srv)
	require.Greater(t, size, 3*serve.MaxBacklog, "the log is much larger than the limit")
	clock := fakehost.NewClock(1_700_000_000_000)
	cut := make(chan struct{}, 1)
	serve.SetClock(wt.tree, clock, func() { cut <- struct{}{} })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newGatedWriter()
	done := serveStream(ctx, wt.tree, w, "")
	select {
	case <-w.asked: // the guest's request call returned: what it sent waits here
	case <-done:
		t.Fatal("the stream ended before its first write")
	}
	held := serve.Backlog(wt.tree)
	require.Greater(t, held, 0)
	require.LessOrEqual(t, held, serve.MaxBacklog+serve.MaxBacklog/4, "about a page of the %d-byte log is held", size)

	blockUntil(t, clock, 1) // the waiting drain's patience
	clock.Advance(serve.BacklogPatience)
	select {
	case <-cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream was not cut")
	}
	require.Zero(t, serve.Backlog(wt.tree), "what waited is dropped")
	require.Zero(t, serve.Requests(wt.tree), "the guest's request was cancelled")

	close(w.gate) // the client reads again: it sees the end
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the cut stream did not end")
	}
	got := ids(t, w.written())
	require.Less(t, len(w.written()), serve.MaxBacklog, "the rest was dropped")
	var from int64 = 1
	if len(got) > 0 {
		requireGapless(t, got, 1, got[len(got)-1])
		from = got[len(got)-1] + 1
	}

	// The client reconnects from the last event it received.
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	req, err := http.NewRequestWithContext(rctx, "GET", srv.URL+"/v1/sessions/tree1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", fmt.Sprint(from-1))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var rest []int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			n, err := strconv.ParseInt(id, 10, 64)
			require.NoError(t, err)
			if rest = append(rest, n); n == last {
				break
			}
		}
	}
	requireGapless(t, rest, from, last)
}

// A slow client that keeps taking what is sent is never cut, however long
// each write takes under the patience: it gets the whole log, in order,
// while the host holds about a page at a time.
func TestServeSlowStreamNotCut(t *testing.T) {
	srv, wt := startTreeWatched(t, serve.Config{Boot: offline()})
	last, _ := bigLog(t, srv)
	clock := fakehost.NewClock(1_700_000_000_000)
	serve.SetClock(wt.tree, clock, func() { t.Error("a reading client's stream was cut") })

	ctx, cancel := context.WithCancel(context.Background())
	w := newGatedWriter()
	done := serveStream(ctx, wt.tree, w, "")
	most := 0
	for {
		select {
		case <-w.asked:
		case <-done: // fails rather than waiting for a write that never comes
			t.Fatalf("the stream ended before the log did: %d bytes written", len(w.written()))
		}
		most = max(most, serve.Backlog(wt.tree))
		clock.Advance(serve.BacklogPatience - time.Second) // each write is slow
		w.gate <- struct{}{}
		<-w.took
		if complete(w.written(), last) {
			break
		}
	}
	requireGapless(t, ids(t, w.written()), 1, last)
	require.LessOrEqual(t, most, serve.MaxBacklog+serve.MaxBacklog/4, "about a page was held at a time")
	cancel()
	close(w.gate)
	<-done
}
