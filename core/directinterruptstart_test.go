package core_test

import (
	"context"
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

// An execution stuck past the interrupt's grace period (its body ignores
// its cancellation) is stopped by the interrupt's direct commit. When that
// commit is durable but reported failed (a late IOERR), its rerun waits for
// storage with the claim lock let go: a prompt admitted then takes the
// claim the interrupt released and finds the stuck execution still
// registered, so it starts nothing. Once the interrupt's rerun finds its
// record stored and forgets that execution, the prompt's turn must start
// here, not at the next wake-up (the simulator's claim-starts-here, seed
// 107 with -sessions 44 -kills 88 -diskfull 1).
func TestPromptAdmittedWhileADirectInterruptWaitsStartsHere(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	started := make(chan *core.Execution, 4)
	release, returned := make(chan struct{}), make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		if x.Prompt() != "stuck" {
			return core.Outcome{Kind: core.Succeeded}
		}
		<-release // a body that ignores its cancellation
		close(returned)
		return core.Outcome{Kind: core.Stopped}
	}))
	sid := n.NewSession("s")
	stuck := n.Admit(sid, "stuck")
	<-started

	f.FailLateCommits(1, faultvfs.IOErrFsync) // the interrupt's direct commit
	var next string
	var err error
	tr.DriveEach(func() {
		timers := tr.Clock.Pending()
		answered := make(chan error, 1)
		go func() {
			_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
			answered <- err
		}()
		tr.Clock.BlockUntil(timers + 1) // the interrupt's grace period
		tr.Clock.Advance(core.DefaultInterruptGrace)
		err = <-answered
	}, func(retry.Wait) {
		if next == "" {
			next = n.Admit(sid, "next")
		}
	})
	require.NoError(t, err)
	require.Equal(t, 1, f.LateCommits(), "the direct commit met its late IOERR")
	require.NotEmpty(t, next, "admitted while the interrupt's rerun waited")

	select {
	case x := <-started:
		assert.Equal(t, next, x.PromptID())
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, "the admitted prompt's turn waits for the next wake-up")
	}
	close(release)
	<-returned
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(stuck))
	assert.Equal(t, "succeeded", tr.PromptState(next))
	assert.False(t, tr.Claim(sid).Exists)
}

// The same race, ended the other way round (the simulator's
// claim-starts-here, seed 1898 with -diskfull 1 -deletes 0.5): the stuck
// execution's body returns while the interrupt's rerun still waits for
// storage. A prompt admitted in that wait took the claim the interrupt's
// durable commit released and found the execution still registered, so it
// started nothing. The execution's own end, fenced off by that commit, is
// then the first moment the session runs nothing here, and the prompt's
// turn must start there: neither the execution's record (it let go of no
// lock, and was fenced) nor the interrupt (still waiting) will start it,
// and the next wake-up is up to 10 s away.
func TestPromptAdmittedWhileADirectInterruptWaitsStartsWhenTheStuckExecutionEnds(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	started := make(chan *core.Execution, 4)
	release, returned := make(chan struct{}), make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		if x.Prompt() != "stuck" {
			return core.Outcome{Kind: core.Succeeded}
		}
		<-release // a body that ignores its cancellation
		close(returned)
		return core.Outcome{Kind: core.Stopped}
	}))
	sid := n.NewSession("s")
	stuck := n.Admit(sid, "stuck")
	<-started

	f.FailLateCommits(1, faultvfs.IOErrFsync) // the interrupt's direct commit
	var next string
	var startedInWait *core.Execution
	var err error
	tr.DriveEach(func() {
		timers := tr.Clock.Pending()
		answered := make(chan error, 1)
		go func() {
			_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
			answered <- err
		}()
		tr.Clock.BlockUntil(timers + 1) // the interrupt's grace period
		tr.Clock.Advance(core.DefaultInterruptGrace)
		err = <-answered
	}, func(retry.Wait) {
		if next != "" {
			return
		}
		// The interrupt's rerun waits for this callback to return.
		next = n.Admit(sid, "next")
		close(release)
		<-returned
		select {
		case startedInWait = <-started:
		case <-time.After(30 * time.Second): // only to fail instead of hanging
		}
	})
	require.NoError(t, err)
	require.Equal(t, 1, f.LateCommits(), "the direct commit met its late IOERR")
	require.NotEmpty(t, next, "admitted while the interrupt's rerun waited")
	require.NotNil(t, startedInWait, "the admitted prompt's turn waits for the interrupt's rerun or the next wake-up")
	assert.Equal(t, next, startedInWait.PromptID())

	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(stuck))
	assert.Equal(t, "succeeded", tr.PromptState(next))
	assert.False(t, tr.Claim(sid).Exists)
}
