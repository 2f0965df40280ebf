package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Once an execution an interrupt told to stop ends, the request reads
// what that end left to stop (interruptSettled). When storage refuses that
// read, the request knows no cutoff and must look again as if it had
// none: never stop less than it must. Here the execution ended succeeded
// just before it saw the cancel and started the next queued turn,
// admitted before the interrupt; the read after it meets a write lock held
// elsewhere for its whole schedule. The request looks again and stops
// that turn.
func TestInterruptWhoseSettleReadFailsLooksAgain(t *testing.T) {
	tr := treetest.New(t)
	tr.DB.BusyTimeout = -1 // a held lock is met at once
	started := make(chan *core.Execution, 4)
	finishFirst := make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		if x.Prompt() == "first" {
			<-finishFirst
			return core.Outcome{Kind: core.Succeeded}
		}
		<-ctx.Done()
		return core.Outcome{Kind: core.Stopped}
	}))
	sid := n.NewSession("s")
	first := n.Admit(sid, "first")
	x := <-started
	queued := n.Admit(sid, "hold: queued before the interrupt")

	// x has read that it ended without a cancel when the interrupt tells
	// it to stop: it records success and starts the queued turn (y).
	xFinishing, xAsked := make(chan struct{}), make(chan struct{})
	t.Cleanup(core.SetFinishingHook(n.Inst, func(e *core.Execution) {
		if e == x {
			close(xFinishing)
			<-xAsked
		}
	}))
	var release func()
	var y *core.Execution
	var lookedAgain bool
	t.Cleanup(core.SetInterruptAskedHook(n.Inst, func(e *core.Execution) {
		if e == x {
			close(xAsked)
			return
		}
		// The request looked again: the read had given up. Storage is back.
		lookedAgain = true
		release()
	}))
	t.Cleanup(core.SetInterruptStoppedHook(n.Inst, func(e *core.Execution) {
		if e == x {
			y = <-started
			release = tr.HoldWriteLock() // the read after x's end fails
		}
	}))

	var did bool
	var err error
	close(finishFirst) // x's body returns; its finish waits for the interrupt
	<-xFinishing
	waits := tr.Drive(func() {
		did, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	})
	require.NoError(t, err)
	require.NotEmpty(t, waits, "the read waited for storage")
	require.NotNil(t, y)
	release() // already, if the request looked again
	require.True(t, lookedAgain, "the request looked again after its read failed")
	assert.Equal(t, queued, y.PromptID())
	assert.Equal(t, "succeeded", tr.PromptState(first), "x ended before it saw the cancel")
	assert.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(queued), "admitted before the interrupt: it stops it")
	n.Idle()
	assert.False(t, tr.Claim(sid).Exists)
}
