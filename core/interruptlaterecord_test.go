package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An interrupt stops what was admitted before it committed, and a request
// that finds an execution already recording an earlier interrupt has
// committed nothing of its own yet. When that execution's record is
// durable but reported failed (a late IOERR), its rerun waits for storage
// with the claim lock let go, the execution still registered: a prompt
// admitted then queues behind it, and a second interrupt asked then tells
// the same execution to stop. The record it sees land is older than that
// prompt, so its cutoff must not end the second request: the prompt,
// admitted before the second interrupt was asked, is that interrupt's to
// stop.
func TestInterruptAskedWhileAnEarlierRecordWaitsStopsWhatWasAdmittedBeforeIt(t *testing.T) {
	tr := treetest.New(t)
	faults := tr.Faults() // before the tree's database opens
	started := make(chan *core.Execution, 4)
	release := make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		select {
		case <-ctx.Done():
			return core.Outcome{Kind: core.Stopped}
		case <-release:
			return core.Outcome{Kind: core.Succeeded}
		}
	}))
	sid := n.NewSession("s")
	first := n.Admit(sid, "first")
	x := <-started

	second := askSecondWhileRecordWaits(t, tr, faults, n, x, "sent after the first interrupt committed", nil, func() error {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser) // x records it
		return err
	})
	assert.True(t, second.answer(t, "the second interrupt to answer"))
	assert.Equal(t, "interrupted", tr.PromptState(second.next),
		"admitted before the second interrupt was asked: that interrupt stops it")
	close(release)
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(first))
	assert.Equal(t, "interrupted", tr.PromptState(second.next))
	assert.False(t, tr.Claim(sid).Exists)
}

// The same with the earlier record an interrupt's direct commit: the
// first request's grace period ran out on a body that ignores its
// cancellation, and its commit is durable but reported failed. A prompt
// admitted in its rerun's wait, and a second interrupt asked then, which
// tells the still registered execution to stop: once the first request
// forgets that execution and the prompt's turn starts, the second stops
// it.
func TestInterruptAskedWhileAnEarlierDirectCommitWaitsStopsWhatWasAdmittedBeforeIt(t *testing.T) {
	tr := treetest.New(t)
	faults := tr.Faults() // before the tree's database opens
	started := make(chan *core.Execution, 4)
	release := make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		if x.Prompt() == "stuck" {
			<-release // a body that ignores its cancellation
			return core.Outcome{Kind: core.Stopped}
		}
		select {
		case <-ctx.Done():
			return core.Outcome{Kind: core.Stopped}
		case <-release:
			return core.Outcome{Kind: core.Succeeded}
		}
	}))
	sid := n.NewSession("s")
	stuck := n.Admit(sid, "stuck")
	x := <-started

	cancelled := make(chan struct{})
	close(cancelled) // the body was told to stop, and ignores it
	second := askSecondWhileRecordWaits(t, tr, faults, n, x, "sent after the first interrupt committed", nil, func() error {
		return interruptPastGrace(t, tr, n, sid, cancelled) // the request's direct commit
	})
	assert.True(t, second.answer(t, "the second interrupt to answer"))
	assert.Equal(t, "interrupted", tr.PromptState(second.next),
		"admitted before the second interrupt was asked: that interrupt stops it")
	close(release)
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(stuck))
	assert.Equal(t, "interrupted", tr.PromptState(second.next))
	assert.False(t, tr.Claim(sid).Exists)
}
