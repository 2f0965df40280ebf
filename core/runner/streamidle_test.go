package runner_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// The stream-idle watchdog measures the model's silence, not the runner's
// own waits for storage: a checkpoint that waits out a full disk for longer
// than stream_idle, while the model's next chunk is ready, does not fail
// the step as a stream that sent nothing.
func TestStreamIdleDoesNotCountStorageWaits(t *testing.T) {
	st := streamingStep(t, runner.NewConfig().WithStreamIdle(10*time.Second).WithCheckpoints(time.Hour, 1))
	tr, fault, feed, n, sid, pid, sub := st.tr, st.fault, st.feed, st.n, st.sid, st.pid, st.sub

	// Within the write window, twice stream_idle.
	fault.FailFor(20*time.Second, faultvfs.Full)
	var beta sync.Once
	waits := tr.DriveEach(func() {
		feed <- chunkText("alpha ") // its checkpoint meets the full disk
		awaitEvent(t, sub, func(ev event.Event) bool {
			return (ev.Type == event.TextCheckpoint && strings.Contains(string(ev.Data), "beta")) || ev.Type == event.ExecutionFailed
		})
		close(feed)
		n.Idle()
	}, func(retry.Wait) {
		// The model's next chunk is ready while the checkpoint waits.
		beta.Do(func() { feed <- chunkText("beta ") })
	})
	require.NotEmpty(t, waits, "the checkpoint waited for storage")

	requireOneStepOf(t, tr, sid, pid, "alpha beta ")
}

// The idle count after a timed checkpoint's wait for storage resumes from
// the model's last chunk, shifted by the wait: a stream longer than
// stream_idle whose chunks came within it, and whose checkpoint then
// waits out a full disk for longer than stream_idle, keeps its step. The
// model's next chunk is not ready when the wait ends, so a watchdog that
// counted the wait, or counted from the step's start rather than from
// the last chunk, fails the step with nothing else to pick.
func TestStreamIdleAfterATimedCheckpointsWait(t *testing.T) {
	st := streamingStep(t, runner.NewConfig().WithStreamIdle(10*time.Second).WithCheckpoints(5*time.Second, 1<<20))
	tr, fault, feed, n, sid, pid, sub := st.tr, st.fault, st.feed, st.n, st.sid, st.pid, st.sub
	armed := func() { // wall, idle and the checkpoint timer
		t.Helper()
		done := make(chan struct{})
		go func() { tr.Clock.BlockUntil(3); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the checkpoint timer was never armed")
		}
	}
	checkpointed := func(text string) {
		t.Helper()
		ev := awaitEvent(t, sub, func(ev event.Event) bool {
			return (ev.Type == event.TextCheckpoint && strings.Contains(string(ev.Data), text)) || ev.Type == event.ExecutionFailed
		})
		require.Equal(t, event.TextCheckpoint, ev.Type, "failed: %s", ev.Data)
	}

	feed <- chunkText("alpha ")
	armed()
	tr.Clock.Advance(8 * time.Second) // the checkpoint at 5 s; 8 s of silence
	checkpointed("alpha")
	feed <- chunkText("beta ") // 8 s into the stream
	armed()

	// Within the write window, twice stream_idle.
	fault.FailFor(20*time.Second, faultvfs.Full)
	waits := tr.DriveEach(func() {
		tr.Clock.Advance(5 * time.Second) // beta's checkpoint meets the full disk
		checkpointed("beta")
		close(feed)
		n.Idle()
	}, nil)
	require.NotEmpty(t, waits, "the checkpoint waited for storage")

	requireOneStepOf(t, tr, sid, pid, "alpha beta ")
}

// requireOneStepOf checks that prompt pid's turn succeeded in one step
// whose text is text (and logs any failure the turn met first).
func requireOneStepOf(t *testing.T, tr *treetest.Tree, sid, pid, text string) {
	t.Helper()
	evs := tr.Events(sid)
	for _, f := range treetest.OfType(evs, event.ExecutionFailed) {
		t.Logf("failed: %s", f.Data)
	}
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	done := treetest.OfType(evs, event.StepCompleted)
	require.Len(t, done, 1)
	var rec event.StepDone
	require.NoError(t, done[0].Decode(&rec))
	assert.Equal(t, text, rec.Text)
}

// streamStep is a session whose first step streams what the test sends
// on feed, its tree's storage under fault's control.
type streamStep struct {
	tr       *treetest.Tree
	fault    *faultvfs.Fault
	feed     chan model.Chunk
	n        *treetest.Node
	sid, pid string
	sub      *core.Subscription
}

// streamingStep boots a runner with cfg over a tree with storage faults,
// admits a prompt to a new session and returns once its first step has
// started, subscribed to the session's events (closed by the test's end).
func streamingStep(t *testing.T, cfg runner.Config) streamStep {
	t.Helper()
	st := streamStep{tr: treetest.New(t), feed: make(chan model.Chunk)}
	st.fault = st.tr.Faults() // before the boot: its instance opens the file through it
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{feed: st.feed} }}
	st.n = st.tr.Boot(newRunner(t, m, cfg))
	st.sid = st.n.NewSession("s")
	st.sub = st.n.Inst.Subscribe(st.sid, 256)
	t.Cleanup(st.sub.Close)
	st.pid = st.n.Admit(st.sid, "go")
	awaitEvent(t, st.sub, func(ev event.Event) bool { return ev.Type == event.StepStarted })
	return st
}
