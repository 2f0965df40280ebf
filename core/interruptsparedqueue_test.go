package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// What an interrupt request must still stop after the execution it told to
// stop recorded its end is every prompt admitted up to that record and
// not ended: queued as well as running. A child's task turn that its
// parent's interrupt ended spares the child's own prompts, and on an
// instance that is stopping it starts none of them, so the one the client
// sent the child stays queued. The client's own interrupt of the child,
// asked before that record, must not answer as if it had stopped
// everything: it cancels that prompt.
func TestInterruptStopsAPromptTheRecordLeftQueued(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	root, child, cx := startChildTask(t, n, d, "hold task")
	own := n.Admit(child.ID, "hold mine")

	// The child's task turn has read that its parent's interrupt ended it;
	// the client's interrupt of the child tells it to stop before its
	// record, and the instance starts stopping, so the record starts no
	// next turn.
	client := interruptBeforeRecord(t, n.Inst, cx, func() {
		gone, cancel := context.WithCancel(ctx)
		cancel() // Close only begins: nothing waits for the executions here
		_ = n.Inst.Close(gone)
		assert.True(t, n.Inst.Closed()) // on the drain goroutine: no FailNow here
	})

	parentDone := make(chan struct{})
	go func() {
		defer close(parentDone)
		_, _ = n.Inst.Interrupt(ctx, root, event.ReasonUser) // may meet the stop: not what is tested
	}()
	assert.True(t, client.answer(t, "the client's interrupt of the child to answer"), "its commit lands before the stop")
	assert.Equal(t, "cancelled", tr.PromptState(own),
		"admitted before the client's interrupt: not left queued to run at the next boot")
	d.Release()
	<-parentDone
	n.Idle()
}
