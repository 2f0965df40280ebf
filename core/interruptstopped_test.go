package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An interrupt request answers whether there was anything to interrupt,
// and that is what every execution it told to stop left, not the last of
// them only. Here the first execution the request tells to stop records
// its turn interrupted, but with a record older than the request (an
// earlier interrupt's, durable though reported failed), so the request
// looks again; the next turn it then tells to stop has already finished
// and records success. The request still stopped a turn: it answers true.
func TestInterruptAnswersATurnItStoppedBeforeLookingAgain(t *testing.T) {
	tr := treetest.New(t)
	faults := tr.Faults() // before the tree's database opens
	started := make(chan *core.Execution, 4)
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		if x.Prompt() == "quick" {
			return core.Outcome{Kind: core.Succeeded} // done before any cancel
		}
		<-ctx.Done()
		return core.Outcome{Kind: core.Stopped}
	}))
	sid := n.NewSession("s")
	first := n.Admit(sid, "first")
	x := <-started

	// The second request tells x, then y (the next turn), to stop: x is
	// reported on asked, y on askedY, which y's finish waits for, so y
	// records the success it read before that cancel.
	var asked chan *core.Execution
	askedY := make(chan struct{}, 1)
	var mu sync.Mutex
	t.Cleanup(core.SetInterruptAskedHook(func(e *core.Execution) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e != x:
			askedY <- struct{}{}
		case asked != nil:
			asked <- e
		}
	}))
	t.Cleanup(core.SetFinishingHook(func(e *core.Execution) {
		if e != x {
			<-askedY
		}
	}))
	// Whoever sees x end first waits for y's start, so the second request
	// looks again with y running.
	var yStarted sync.Once
	var y *core.Execution
	t.Cleanup(core.SetInterruptStoppedHook(func(e *core.Execution) {
		if e == x {
			yStarted.Do(func() { y = <-started })
		}
	}))

	var next string
	second := make(chan error, 1)
	var secondDid bool
	faults.FailLateCommits(1, faultvfs.IOErrFsync) // x's record of the first interrupt
	var err error
	tr.DriveEach(func() {
		_, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	}, func(retry.Wait) {
		if next != "" {
			return
		}
		require.Equal(t, "interrupted", tr.PromptState(first), "x's record is stored, reported failed")
		next = n.Admit(sid, "quick")
		mu.Lock()
		asked = make(chan *core.Execution, 1)
		mu.Unlock()
		go func() {
			var err error
			secondDid, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
			second <- err
		}()
		require.Same(t, x, <-asked, "the second request told x, still registered, to stop")
	})
	require.NoError(t, err)
	require.Equal(t, 1, faults.LateCommits(), "x's record met its late IOERR")

	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, "the second interrupt did not answer")
	}
	require.NotNil(t, y)
	assert.Equal(t, next, y.PromptID(), "the second request looked again and found the next turn")
	assert.Equal(t, "succeeded", tr.PromptState(next), "it ended before it saw the cancel")
	assert.True(t, secondDid, "x, which the second request told to stop, ended with its turn interrupted")
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(first))
	assert.False(t, tr.Claim(sid).Exists)
}
