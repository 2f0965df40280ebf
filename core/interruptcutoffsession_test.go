package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An interrupt's cutoff is a seq of its own session's log, and only that
// session's prompts are measured against it: seqs of two sessions do not
// compare. Another session's turn, running with an admission seq below the
// record's, is nothing this interrupt left unended; taking it for one would
// make the request look again and stop the prompt its client sent right
// after the interrupt committed.
func TestInterruptCutoffCountsOnlyItsOwnSessionsPrompts(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	other := n.NewSession("other")
	busy := n.Admit(other, "hold: another session's turn, admitted early in its own log")
	<-d.Started
	sid := n.NewSession("s")
	n.Admit(sid, "hold") // x's turn
	x := <-d.Started
	queued := n.Admit(sid, "queued before the interrupt")

	// Once x has recorded the interrupt, and before the request looks
	// again, the client's next prompt is admitted and its turn starts.
	after := admitOnceRecorded(t, tr, n, d, x)

	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, did)
	require.NotNil(t, after.turn, "the next prompt's turn started while the interrupt looked again")
	assert.Equal(t, "cancelled", tr.PromptState(queued), "queued when the interrupt was asked")
	assert.Equal(t, "running", tr.PromptState(after.id), "admitted after the interrupt committed: its turn goes on")
	assert.Equal(t, "running", tr.PromptState(busy), "another session's turn is not this interrupt's")

	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(after.id))
	assert.Equal(t, "succeeded", tr.PromptState(busy))
}
