package core_test

import (
	"testing"
	"time"

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
	root := n.NewSession("root")
	n.Admit(root, "hold")
	rx := within(t, d.Started, "the root's turn to start")
	child, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "hold task", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	within(t, d.Started, "the child's task turn to start")
	require.NoError(t, n.Inst.Close(ctx), "a graceful stop records both turns interrupted for shutdown")

	d2 := treetest.NewDriver(16)
	var cx *core.Execution
	asked := make(chan struct{})
	clientDone := make(chan error, 1)
	var clientDid bool
	var inst *core.Instance
	t.Cleanup(core.SetInterruptAskedHook(func(e *core.Execution) {
		if e == cx {
			close(asked)
		}
	}))
	// The child's task turn has read that its parent's interrupt ended it;
	// the client's own interrupt of the child tells it to stop before its
	// record.
	t.Cleanup(core.SetFinishingHook(func(e *core.Execution) {
		if e != cx {
			return
		}
		go func() {
			var err error
			clientDid, err = inst.Interrupt(ctx, child.ID, event.ReasonUser)
			clientDone <- err
		}()
		<-asked
	}))
	n2 := tr.Boot(d2)
	inst = n2.Inst
	for range 2 {
		x := within(t, d2.Started, "the turns to resume")
		if x.SessionID() == child.ID {
			cx = x
		}
	}
	require.NotNil(t, cx, "the child's task turn resumed")
	own := n2.Admit(child.ID, "hold mine")

	_, err = n2.Inst.Interrupt(ctx, root, event.ReasonUser)
	require.NoError(t, err)
	select {
	case err := <-clientDone:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, "the client's interrupt of the child did not answer")
	}
	assert.True(t, clientDid)
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
