package core_test

// One interrupt stops the turn it was sent for and cancels what was queued
// with it; it never reaches a prompt admitted after it committed. The
// interrupt request goes on looking after the execution it stopped ends
// (that end may have started a turn admitted before the interrupt), and a
// prompt a client sends meanwhile, say right after clicking "stop", can be
// running by then.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// The cutoff is a seq of the interrupt's own session's log, and only that
// session's prompts are measured against it: seqs of two sessions do not
// compare. Another session's turn, running with an admission seq below the
// record's, is nothing this interrupt left unended; taking it for one would
// make the request look again and stop the next prompt.
func TestInterruptSparesAPromptAdmittedAfterItsCommit(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	other := n.NewSession("other")
	busy := n.Admit(other, "hold: another session's turn, admitted early in its own log")
	<-d.Started
	sid := n.NewSession("s")
	running := n.Admit(sid, "hold")
	x := <-d.Started
	queued := n.Admit(sid, "queued before the interrupt")

	// Once x has recorded the interrupt, and before the request looks
	// again, the client's next prompt is admitted and its turn starts.
	after := admitOnceRecorded(t, tr, n, d, x)

	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, did)
	require.NotNil(t, after.turn, "the next prompt's turn started while the interrupt looked again")
	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued), "queued when the interrupt was asked")
	assert.Equal(t, "running", tr.PromptState(after.id), "admitted after the interrupt committed: its turn goes on")
	assert.Equal(t, "running", tr.PromptState(busy), "another session's turn is not this interrupt's")

	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(after.id))
	assert.Equal(t, "succeeded", tr.PromptState(busy))
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, 2, "one interrupt, then the later prompt's own end")
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
	assert.Equal(t, event.ExecutionSucceeded, terms[1].Type)
}
