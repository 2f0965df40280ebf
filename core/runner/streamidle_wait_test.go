package runner_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A checkpoint's wait for storage is skipped by the idle count, not a
// fresh start of it: the model's silence before the checkpoint still
// counts. A model silent 5 s before a timed checkpoint that waits out a
// full disk fails its step stream_idle (10 s) after its last chunk, the
// wait left out: 5 s after the wait ends, not 10 s.
func TestStreamIdleCountsTheSilenceBeforeACheckpointsWait(t *testing.T) {
	st := streamingStep(t, runner.NewConfig().WithStreamIdle(10*time.Second).WithCheckpoints(5*time.Second, 1<<20))
	tr, fault, feed, n, sub := st.tr, st.fault, st.feed, st.n, st.sub
	blockUntil := func(waiters int, what string) {
		t.Helper()
		done := make(chan struct{})
		go func() { tr.Clock.BlockUntil(waiters); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
	}

	feed <- chunkText("alpha ")
	blockUntil(3, "the checkpoint timer was never armed") // wall, idle, checkpoint
	fault.FailFor(20*time.Second, faultvfs.Full)
	waits := tr.Drive(func() {
		tr.Clock.Advance(5 * time.Second) // the checkpoint, 5 s after alpha, meets the full disk
		ev := awaitEvent(t, sub, func(ev event.Event) bool {
			return ev.Type == event.TextCheckpoint || ev.Type == event.ExecutionFailed
		})
		require.Equal(t, event.TextCheckpoint, ev.Type, "failed: %s", ev.Data)
	})
	require.NotEmpty(t, waits, "the checkpoint waited for storage")
	blockUntil(2, "the idle count was never re-armed") // wall, idle

	tr.Clock.Advance(5 * time.Second) // 10 s of the model's silence, the wait left out
	ev := awaitEvent(t, sub, func(ev event.Event) bool { return ev.Type == event.ExecutionFailed })
	var f event.Failed
	require.NoError(t, ev.Decode(&f))
	assert.True(t, strings.Contains(f.Message, "sent nothing for 10s"), f.Message)
	close(feed)
	n.Idle()
}
