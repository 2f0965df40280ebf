package core_test

// An interrupt request tells the execution to stop under the claim lock and
// lets the lock go; from then on the execution's end may record the
// interrupt. Whether a record is one written after the request told the
// execution to stop is read before the lock is let go: read later, the
// record of this very cancel would pass for an older one (x.recordBegun),
// and the request would look again and stop the next prompt the client
// sent once the interrupt had committed (DESIGN §6.4).

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

func TestInterruptTakesARecordBegunAfterItsCancelForItsOwn(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	running := n.Admit(sid, "hold")
	x := <-d.Started
	queued := n.Admit(sid, "queued before the interrupt")

	// The request has told x to stop and let go of the claim lock: x's
	// end records the interrupt, and unregisters x, before the request
	// goes on.
	t.Cleanup(core.SetInterruptCancelledHook(n.Inst, func(cancelled *core.Execution) {
		if cancelled == x {
			within(t, x.Ended(), "x to record the interrupt and end")
		}
	}))
	// Then, before the request looks at what x's end left, the client's
	// next prompt is admitted and its turn starts.
	after := admitOnceRecorded(t, tr, n, d, x)

	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, did)
	require.NotNil(t, after.turn, "the next prompt's turn started before the request read x's end")
	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued), "queued when the interrupt was asked")
	assert.Equal(t, "running", tr.PromptState(after.id), "admitted after the interrupt committed: its turn goes on")

	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(after.id))
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, 2, "one interrupt, then the later prompt's own end")
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
	assert.Equal(t, event.ExecutionSucceeded, terms[1].Type)
}
