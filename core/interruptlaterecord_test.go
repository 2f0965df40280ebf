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

	// Set once the prompt is admitted: then only the second request asks.
	var asked chan *core.Execution
	var mu sync.Mutex
	t.Cleanup(core.SetInterruptAskedHook(func(e *core.Execution) {
		mu.Lock()
		defer mu.Unlock()
		if asked != nil {
			asked <- e
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
		next = n.Admit(sid, "sent after the first interrupt committed")
		mu.Lock()
		asked = make(chan *core.Execution, 1)
		mu.Unlock()
		go func() {
			var err error
			secondDid, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
			second <- err
		}()
		// The second request told x, still registered, to stop, and
		// waits for it.
		require.Same(t, x, <-asked)
	})
	require.NoError(t, err)
	require.Equal(t, 1, faults.LateCommits(), "x's record met its late IOERR")
	require.NotEmpty(t, next, "admitted while x's record waited for storage")

	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, "the second interrupt did not answer")
	}
	assert.True(t, secondDid)
	assert.Equal(t, "interrupted", tr.PromptState(next),
		"admitted before the second interrupt was asked: that interrupt stops it")
	close(release)
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(first))
	assert.Equal(t, "interrupted", tr.PromptState(next))
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

	var asked chan *core.Execution
	var mu sync.Mutex
	t.Cleanup(core.SetInterruptAskedHook(func(e *core.Execution) {
		mu.Lock()
		defer mu.Unlock()
		if asked != nil {
			asked <- e
		}
	}))

	var next string
	second := make(chan error, 1)
	var secondDid bool
	faults.FailLateCommits(1, faultvfs.IOErrFsync) // the first request's direct commit
	cancelled := make(chan struct{})
	close(cancelled) // the body was told to stop, and ignores it
	var err error
	tr.DriveEach(func() {
		err = interruptPastGrace(tr, n, sid, cancelled)
	}, func(retry.Wait) {
		if next != "" {
			return
		}
		require.Equal(t, "interrupted", tr.PromptState(stuck), "the direct commit is stored, reported failed")
		next = n.Admit(sid, "sent after the first interrupt committed")
		mu.Lock()
		asked = make(chan *core.Execution, 1)
		mu.Unlock()
		go func() {
			var err error
			secondDid, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
			second <- err
		}()
		require.Same(t, x, <-asked, "the second request told the stuck execution to stop")
	})
	require.NoError(t, err)
	require.Equal(t, 1, faults.LateCommits(), "the direct commit met its late IOERR")
	require.NotEmpty(t, next, "admitted while the direct commit waited for storage")

	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, "the second interrupt did not answer")
	}
	assert.True(t, secondDid)
	assert.Equal(t, "interrupted", tr.PromptState(next),
		"admitted before the second interrupt was asked: that interrupt stops it")
	close(release)
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(stuck))
	assert.Equal(t, "interrupted", tr.PromptState(next))
	assert.False(t, tr.Claim(sid).Exists)
}
