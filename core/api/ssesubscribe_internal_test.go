package api

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/internal/treetest"
)

// hookWriter is a stream's writer that runs hook at its first Flush (the
// end of the stream's catch-up from the log) and reports each write.
type hookWriter struct {
	mu     sync.Mutex
	header httpmsg.Header
	body   strings.Builder
	once   sync.Once
	hook   func()
	wrote  chan struct{}
}

func (w *hookWriter) Header() httpmsg.Header { return w.header }
func (w *hookWriter) WriteHeader(int)        {}
func (w *hookWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.body.Write(b)
	w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(b), nil
}
func (w *hookWriter) Flush() { w.once.Do(w.hook) }
func (w *hookWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.String()
}

// An event committed right after the stream's catch-up read the log (and
// nothing after it) still reaches the stream: the stream subscribed
// before it read the log, so nothing committed in between is missed.
func TestEventCommittedJustAfterCatchUpIsSent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := treetest.New(t).Boot(core.DriverFunc(treetest.Answer))
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "alice"})
	require.NoError(t, err)
	h, err := NewTreeHandler(TreeDeps{Clock: fakehost.NewClock(0)}, NewConfig())
	require.NoError(t, err)

	w := &hookWriter{header: httpmsg.Header{}, wrote: make(chan struct{}, 1)}
	w.hook = func() {
		_, err := n.Inst.Admit(ctx, "s", core.PromptInput{Text: "hi"})
		require.NoError(t, err)
		n.Idle() // the whole turn commits here; nothing follows it
	}
	r, err := httpmsg.NewRequest(ctx, httpmsg.MethodGet, "http://localhost/v1/sessions/s/events", nil)
	require.NoError(t, err)
	r.SetPathValue("id", "s")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.events(w, r, &Tree{RootID: "s", Principal: "alice", Instance: n.Inst})
	}()
	deadline := time.After(10 * time.Second) // bounds a failure only
	for !strings.Contains(w.text(), string(event.ExecutionSucceeded)) {
		select {
		case <-w.wrote:
		case <-deadline:
			t.Fatalf("the turn's events never reached the stream; it sent:\n%s", w.text())
		}
	}
	cancel()
	<-done
}
