package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// feedModel streams whatever the test feeds it until the feed is closed.
type feedModel struct{ feed chan string }

func (m *feedModel) Name() string { return "feed" }
func (m *feedModel) Stream(context.Context, model.Request) (model.Stream, error) {
	return &feedStream{m.feed}, nil
}

type feedStream struct{ feed chan string }

func (s *feedStream) Recv(ctx context.Context) (model.Chunk, error) {
	select {
	case w, ok := <-s.feed:
		if !ok {
			return model.Chunk{Finish: model.FinishStop}, io.EOF
		}
		return model.Chunk{Text: w}, nil
	case <-ctx.Done():
		return model.Chunk{}, ctx.Err()
	}
}
func (s *feedStream) Close() error { return nil }

// feedRunner is a turn runner over a feedModel, and the feed.
func feedRunner(t *testing.T) (chan string, *runner.Runner) {
	feed := make(chan string)
	reg, err := tool.NewRegistry()
	require.NoError(t, err)
	r, err := runner.New(&feedModel{feed}, reg, runner.NewConfig())
	require.NoError(t, err)
	return feed, r
}

// frame is one SSE frame.
type frame struct {
	id    string
	event string
	data  string
}

// follow reads frames from an event stream into out until a turn terminal.
// started gets nil once the response headers arrived (the handler flushes
// them only after it subscribed, so nothing committed later can be
// missed), or why the stream did not start (an error, a status other than
// 200), then out is closed: follow runs on its own goroutine, where a
// test must not stop, so the test checks it with streaming. A stream that
// never brings its terminal is cut after followLimit, closing out, so a
// test that waits for frames fails instead of hanging.
func follow(url string, header http.Header, started chan<- error, out chan<- frame) {
	fail := func(err error) {
		started <- fmt.Errorf("follow %s: %w", url, err)
		close(out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), followLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		fail(err)
		return
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		fail(fmt.Errorf("status %d, want 200: %s", resp.StatusCode, body))
		return
	}
	started <- nil
	r := bufio.NewReader(resp.Body)
	var f frame
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			close(out)
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if f.event != "" {
				out <- f
				if f.event == string(event.ExecutionSucceeded) {
					close(out)
					return
				}
			}
			f = frame{}
		case strings.HasPrefix(line, "id: "):
			f.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			f.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			f.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// followLimit is how long follow reads a stream at most: far past what
// any test here needs, only to fail instead of hanging.
const followLimit = 30 * time.Second

// streaming waits until follow's stream started, failing the test with
// the reason if it did not.
func streaming(t *testing.T, started <-chan error) {
	t.Helper()
	require.NoError(t, <-started, "the event stream did not start")
}

// Convergence: a client that hydrates from the snapshot and follows the
// stream from its cursor ends with the same durable events, each exactly
// once, as a client that reads the stream from 0, while a turn streams.
func TestSnapshotThenStreamConvergesWithStreamFromZero(t *testing.T) {
	feed, r := feedRunner(t)
	f := newFixture(t, r, nil)
	c := f.client(t, "")
	id := c.create()
	require.Equal(t, 202, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"stream please"}`, nil))
	for i := range 5 {
		feed <- "early" + strconv.Itoa(i) + " "
	}

	var snap struct{ Cursor int64 }
	require.Equal(t, 200, c.do("GET", "/v1/sessions/"+id, "", &snap))
	require.Greater(t, snap.Cursor, int64(0))
	hydrated, full := make(chan frame, 256), make(chan frame, 256)
	readyA, readyB := make(chan error, 1), make(chan error, 1)
	go follow(f.srv.URL+"/v1/sessions/"+id+"/events?after="+strconv.FormatInt(snap.Cursor, 10), http.Header{}, readyA, hydrated)
	go follow(f.srv.URL+"/v1/sessions/"+id+"/events", http.Header{"Last-Event-Id": {"0"}}, readyB, full)
	streaming(t, readyA) // from the snapshot's cursor: the last event's seq is a valid cursor
	streaming(t, readyB)
	for i := range 5 {
		feed <- "late" + strconv.Itoa(i) + " "
	}
	close(feed)

	durable := func(frames <-chan frame) (ids []int64, deltas int) {
		for fr := range frames {
			if fr.id == "" {
				deltas++
				continue
			}
			n, err := strconv.ParseInt(fr.id, 10, 64)
			require.NoError(t, err)
			var ev event.Event
			require.NoError(t, json.Unmarshal([]byte(fr.data), &ev))
			assert.Equal(t, n, ev.Seq)
			assert.Equal(t, fr.event, string(ev.Type))
			ids = append(ids, n)
		}
		return ids, deltas
	}
	fromCursor, hydratedDeltas := durable(hydrated)
	fromZero, _ := durable(full)
	require.NotEmpty(t, fromZero)
	for i, seq := range fromZero {
		require.Equal(t, int64(i+1), seq, "stream from 0: contiguous, each once")
	}
	assert.Equal(t, fromZero[snap.Cursor:], fromCursor, "snapshot + stream = stream from 0")
	assert.Greater(t, hydratedDeltas, 0, "live deltas reach the follower")
}

// A stream follows its tree to the next instance when the one it
// subscribed to stops (idle eviction, restart), and a snapshot taken while a
// step streams shows its checkpointed text as a partial message.
func TestStreamSurvivesInstanceRestartAndSnapshotShowsPartialText(t *testing.T) {
	feed, r := feedRunner(t)
	f := newFixture(t, r, nil)
	c := f.client(t, "")
	id := c.create()
	frames, ready := make(chan frame, 256), make(chan error, 1)
	go follow(f.srv.URL+"/v1/sessions/"+id+"/events", http.Header{}, ready, frames)
	streaming(t, ready)

	// The instance stops (graceful, as idle eviction does) and a new one
	// boots over the same file; the stream must find it.
	mt := f.trees.tree(id)
	require.NoError(t, mt.node.Inst.Close(context.Background()))
	f.trees.mu.Lock()
	mt.node = mt.tree.Boot(r)
	f.trees.mu.Unlock()

	require.Equal(t, 202, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"after restart"}`, nil))
	feed <- "partial "
	feed <- "answer "
	for fr := range frames { // applied once its delta is out
		if fr.event == string(event.TextDelta) && strings.Contains(fr.data, "answer") {
			break
		}
	}
	mt.tree.Clock.BlockUntil(3) // the step's wall, idle and checkpoint timers
	mt.tree.Clock.Advance(runner.DefaultCheckpointEvery)
	var snap struct {
		Messages []struct {
			Role    string
			Text    string
			Partial bool
		}
	}
	checkpointed := false
	for fr := range frames {
		if fr.event == string(event.TextCheckpoint) {
			checkpointed = true
			break
		}
	}
	require.True(t, checkpointed, "the step's checkpoint reached the stream")
	require.Equal(t, 200, c.do("GET", "/v1/sessions/"+id, "", &snap))
	require.NotEmpty(t, snap.Messages)
	last := snap.Messages[len(snap.Messages)-1]
	assert.True(t, last.Partial)
	assert.Equal(t, "partial answer ", last.Text)

	close(feed)
	var types []string
	for fr := range frames {
		types = append(types, fr.event)
	}
	assert.Contains(t, types, string(event.ExecutionSucceeded), "events of the new instance reached the stream")
}

// A HEAD on the event stream sends the headers a GET would, no proxy
// buffering included, and no body.
func TestEventsHeadSendsStreamHeaders(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(1), nil)
	id := f.client(t, "").create()
	req, err := http.NewRequest("HEAD", f.srv.URL+"/v1/sessions/"+id+"/events", nil)
	require.NoError(t, err)
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
}

// Last-Event-ID given twice is refused, as a query parameter given twice
// is, on every host: Cloudflare joins the two into one value ("0, 1"),
// which no host could read, so taking the first here would answer what
// the Worker refuses.
func TestEventsLastEventIDTwiceRefused(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(1), nil)
	id := f.client(t, "").create()
	// A deadline for a failing test only: a stream never ends by itself.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/sessions/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Add("Last-Event-ID", "0")
	req.Header.Add("Last-Event-ID", "1")
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	var e api.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	assert.Equal(t, api.ErrInvalidRequest, e.Error.Type)
	assert.Equal(t, "Last-Event-ID is given more than once; give it once", e.Error.Message)
}

// A bad cursor is refused naming where it came from: Last-Event-ID (which
// wins over ?after=) or after.
func TestEventsBadCursorNamesItsSource(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(1), nil)
	id := f.client(t, "").create()
	for _, c := range []struct{ after, last, want string }{
		{"", "x", "Last-Event-ID must be a whole number from 0 to 9007199254740991"},
		{"1", "-1", "Last-Event-ID must be a whole number from 0 to 9007199254740991"},
		{"x", "", "after must be a whole number from 0 to 9007199254740991"},
		{"9007199254740992", "", "after must be a whole number from 0 to 9007199254740991"},
		{"", "9007199254740993", "Last-Event-ID must be a whole number from 0 to 9007199254740991"},
		{"%2B1", "", "after must be a whole number from 0 to 9007199254740991"},
		{"", "+1", "Last-Event-ID must be a whole number from 0 to 9007199254740991"},
		{"1e0", "", "after must be a whole number from 0 to 9007199254740991"},
	} {
		// A deadline for a failing test only: a cursor wrongly taken as
		// valid opens a stream that never ends by itself.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/sessions/"+id+"/events?after="+c.after, nil)
		require.NoError(t, err)
		if c.last != "" {
			req.Header.Set("Last-Event-ID", c.last)
		}
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		if !assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "after=%q Last-Event-ID=%q", c.after, c.last) {
			resp.Body.Close() // a stream: do not read it
			cancel()
			continue
		}
		var e api.ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		cancel()
		assert.Equal(t, c.want, e.Error.Message)
	}
}

// Past the tree's stream limit, a new stream ends the oldest: its client
// reads to the end of its body, and the new stream serves.
func TestEventsPastTheLimitEndsTheOldest(t *testing.T) {
	f := newFixtureWith(t, treetest.NewDriver(1), nil, api.NewConfig().WithStreamLimit(1))
	id := f.client(t, "").create()
	// A deadline for a failing test only: the oldest stream never ends
	// without the limit.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() *http.Response {
		req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/sessions/"+id+"/events", nil)
		require.NoError(t, err)
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	oldest := open()
	newest := open()
	_, err := io.ReadAll(oldest.Body)
	require.NoError(t, err, "the oldest stream ended cleanly")
	assert.Equal(t, 200, newest.StatusCode)
}

// A cursor past the session's last event is refused: the stream would skip
// every event up to it (seqs are never reused), looking alive and sending
// nothing stored. The last event's seq itself is a cursor like any other.
func TestEventsCursorPastTheLogRefused(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(1), nil)
	id := f.client(t, "").create() // its log: session.created, seq 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	do := func(method, after, last string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, method, f.srv.URL+"/v1/sessions/"+id+"/events?after="+after, nil)
		require.NoError(t, err)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, c := range []struct{ method, after, last, want string }{
		{"GET", "2", "", "after 2 is past the session's last event: the session has no event 2; give the id of the last event received, or 0 for the whole log"},
		{"GET", "", "9000", "Last-Event-ID 9000 is past the session's last event: the session has no event 9000; give the id of the last event received, or 0 for the whole log"},
		{"GET", "1", "2", "Last-Event-ID 2 is past the session's last event: the session has no event 2; give the id of the last event received, or 0 for the whole log"},
		{"HEAD", "2", "", ""},
	} {
		resp := do(c.method, c.after, c.last)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, c)
		if c.want != "" {
			var e api.ErrorBody
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			assert.Equal(t, api.ErrInvalidRequest, e.Error.Type)
			assert.Equal(t, c.want, e.Error.Message)
		}
	}
	for _, after := range []string{"0", "1"} {
		resp := do("GET", after, "")
		assert.Equal(t, http.StatusOK, resp.StatusCode, after)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	}
}

// A stream follows its tree to the next instance only while the tree is
// still the one it was opened on: a library caller may delete a tree and
// create another under the same id (api.Index takes any root id), for
// another principal or for the same one, and the stream must end rather
// than send the new tree's events (or skip them up to its old cursor).
func TestStreamDoesNotFollowTheIDToAnotherTree(t *testing.T) {
	for _, newOwner := range []string{"bob", api.AnonymousPrincipal} {
		t.Run(newOwner, func(t *testing.T) {
			d := treetest.NewDriver(16)
			d.Release()
			f := newFixture(t, d, nil) // every request is the anonymous principal's
			id := f.client(t, "").create()
			frames, ready := make(chan frame, 256), make(chan error, 1)
			go follow(f.srv.URL+"/v1/sessions/"+id+"/events", http.Header{}, ready, frames)
			streaming(t, ready)

			// The id is taken by a new tree while the stream's instance
			// still runs; its session speaks; then the old instance stops.
			old := f.trees.tree(id)
			f.trees.mu.Lock()
			delete(f.trees.trees, id)
			f.trees.mu.Unlock()
			_, err := f.trees.Create(context.Background(), id, newOwner, func(inst *core.Instance) error {
				_, err := inst.CreateSession(context.Background(), core.NewSession{ID: id, Principal: newOwner})
				return err
			})
			require.NoError(t, err)
			if newOwner != api.AnonymousPrincipal {
				// Re-created within the same millisecond: only its
				// principal tells the new tree from the old.
				f.trees.mu.Lock()
				f.trees.trees[id].info.CreatedAt = old.info.CreatedAt
				f.trees.mu.Unlock()
			}
			fresh := f.trees.tree(id).node
			fresh.Admit(id, "the new tree's words")
			fresh.Idle()
			require.NoError(t, old.node.Inst.Close(context.Background()))

			for fr := range frames { // closed when the stream ends
				require.NotContains(t, fr.data, "the new tree's words", "the stream went on into another tree")
			}
			assert.NotContains(t, f.log.String(), "panicked", "the stream ends quietly, not by a panic")
		})
	}
}
