package core_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
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

	// The second request tells x, then y (the next turn), to stop; y's
	// finish waits for that cancel, so y records the success it read
	// before it.
	askedY := make(chan struct{}, 1)
	t.Cleanup(core.SetFinishingHook(n.Inst, func(e *core.Execution) {
		if e != x {
			<-askedY
		}
	}))
	// Whoever sees x end first waits for y's start, so the second request
	// looks again with y running.
	var yStarted sync.Once
	var y *core.Execution
	t.Cleanup(core.SetInterruptStoppedHook(n.Inst, func(e *core.Execution) {
		if e == x {
			yStarted.Do(func() { y = <-started })
		}
	}))

	second := askSecondWhileRecordWaits(t, tr, faults, n, x, "quick", func(*core.Execution) { askedY <- struct{}{} }, func() error {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser) // x records it
		return err
	})
	secondDid := second.answer(t, "the second interrupt to answer")
	next := second.next
	require.NotNil(t, y)
	assert.Equal(t, next, y.PromptID(), "the second request looked again and found the next turn")
	assert.Equal(t, "succeeded", tr.PromptState(next), "it ended before it saw the cancel")
	assert.True(t, secondDid, "x, which the second request told to stop, ended with its turn interrupted")
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(first))
	assert.False(t, tr.Claim(sid).Exists)
}
