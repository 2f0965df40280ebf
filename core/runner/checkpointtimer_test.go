package runner_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Every checkpoint interval with unsaved text gets its checkpoint, not only
// the first: the timer is armed again after a timed checkpoint, so a kill
// loses at most one interval of streamed text, however long the step.
func TestTimedCheckpointsRepeat(t *testing.T) {
	tr := treetest.New(t)
	feed := make(chan model.Chunk)
	m := &scriptModel{steps: func(k int) scriptStep { return scriptStep{feed: feed} }}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 256)
	defer sub.Close()
	n.Admit(sid, "write")
	// Both waits are bounded in real time only to fail instead of hanging.
	waitFor := func(typ event.Type, text string) event.Event {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev, ok := <-sub.C:
				require.True(t, ok, "subscription closed before %s", typ)
				if ev.Type == typ && strings.Contains(string(ev.Data), text) {
					return ev
				}
			case <-deadline:
				t.Fatalf("no %s %q within 10 s", typ, text)
			}
		}
	}
	blockUntil := func(waiters int, what string) {
		t.Helper()
		armed := make(chan struct{})
		go func() { tr.Clock.BlockUntil(waiters); close(armed) }()
		select {
		case <-armed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the clock never had %d timers", what, waiters)
		}
	}
	waitFor(event.StepStarted, "")
	for i, w := range []string{"one ", "two "} {
		feed <- model.Chunk{Text: w}
		waitFor(event.TextDelta, w)
		blockUntil(3, "wall, idle and the checkpoint timer "+strconv.Itoa(i+1))
		tr.Clock.Advance(time.Second)
		var cp event.Checkpoint
		require.NoError(t, waitFor(event.TextCheckpoint, "").Decode(&cp), "checkpoint %d", i+1)
		assert.Equal(t, w, cp.Text)
	}
	n.Crash()
}
