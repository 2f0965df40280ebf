package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A turn stopped by a graceful shutdown has an execution.interrupted of
// its own (reason shutdown) and resumes after the restart, so a prompt's
// later interrupt is not its only one: the cutoff an interrupt request
// reads is the latest record naming the prompt, never the shutdown's.
//
// Here a child's task turn, resumed after a restart, ends with its
// parent's interrupt (the child's own prompts are spared and the next of
// them starts), while the client's own interrupt of the child, asked
// before that end was recorded, waits for it. The child's own prompt was
// admitted after the shutdown record but before the client's interrupt:
// that interrupt stops it.
func TestInterruptCutoffIsTheLatestRecordNotAShutdowns(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	root, child, _ := startChildTask(t, n, d, "hold task")
	require.NoError(t, n.Inst.Close(ctx), "a graceful stop records both turns interrupted for shutdown")

	d2 := treetest.NewDriver(16)
	n2 := tr.Boot(d2)
	var cx *core.Execution
	for range 2 {
		x := within(t, d2.Started, "the turns to resume")
		if x.SessionID() == child.ID {
			cx = x
		}
	}
	require.NotNil(t, cx, "the child's task turn resumed")
	own := n2.Admit(child.ID, "hold mine")
	// The child's task turn has read that its parent's interrupt ended it;
	// the client's own interrupt of the child tells it to stop before its
	// record.
	client := interruptBeforeRecord(t, n2.Inst, cx, nil)

	_, err := n2.Inst.Interrupt(ctx, root, event.ReasonUser)
	require.NoError(t, err)
	assert.True(t, client.answer(t, "the client's interrupt of the child to answer"))
	assert.Equal(t, "interrupted", tr.PromptState(own),
		"admitted before the client's interrupt of the child: that interrupt stops it")
	d2.Release()
	n2.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(own))
	var records int
	for _, ev := range tr.Events(child.ID) {
		var d event.Interrupted
		if ev.Type == event.ExecutionInterrupted && ev.Decode(&d) == nil && d.PromptID == cx.PromptID() {
			records++
		}
	}
	assert.Equal(t, 2, records, "the task turn's shutdown record, then its end")
}
