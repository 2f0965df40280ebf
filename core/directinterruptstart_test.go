package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
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
	s := newStuckExecution(t)
	var next string
	var during []core.ClaimState
	s.interruptWithLateCommit(t, func() {
		if next == "" {
			next = s.n.Admit(s.sid, "next")
			var err error
			during, err = s.n.Inst.Claims(ctx)
			require.NoError(t, err)
		}
	})
	require.NotEmpty(t, next, "admitted while the interrupt's rerun waited")
	// The stuck execution, told to stop but still registered, is the
	// session's: the admission started nothing beside it.
	require.Len(t, during, 1, "the admission took the claim")
	assert.Empty(t, during[0].ExecutionID, "a second execution began while the stuck one was registered")

	select {
	case x := <-s.started:
		assert.Equal(t, next, x.PromptID())
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, "the admitted prompt's turn waits for the next wake-up")
	}
	close(s.release)
	<-s.returned
	s.ended(t, next)
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
	s := newStuckExecution(t)
	var next string
	var startedInWait *core.Execution
	s.interruptWithLateCommit(t, func() {
		if next != "" {
			return
		}
		// The interrupt's rerun waits for this callback to return.
		next = s.n.Admit(s.sid, "next")
		close(s.release)
		<-s.returned
		select {
		case startedInWait = <-s.started:
		case <-time.After(30 * time.Second): // only to fail instead of hanging
		}
	})
	require.NotEmpty(t, next, "admitted while the interrupt's rerun waited")
	require.NotNil(t, startedInWait, "the admitted prompt's turn waits for the interrupt's rerun or the next wake-up")
	assert.Equal(t, next, startedInWait.PromptID())

	s.ended(t, next)
}

// stuckExecution is a session whose first turn, prompt "stuck", has a body
// that ignores its cancellation until release is closed (returned closes
// once it has); every later turn succeeds at once. started hears of each
// execution as it starts.
type stuckExecution struct {
	tr                *treetest.Tree
	faults            *faultvfs.Fault
	n                 *treetest.Node
	sid, stuck        string
	started           chan *core.Execution
	release, returned chan struct{}
}

func newStuckExecution(t *testing.T) *stuckExecution {
	s := &stuckExecution{tr: treetest.New(t), started: make(chan *core.Execution, 4),
		release: make(chan struct{}), returned: make(chan struct{})}
	s.faults = s.tr.Faults() // before the tree's database opens
	s.n = s.tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		s.started <- x
		if x.Prompt() != "stuck" {
			return core.Outcome{Kind: core.Succeeded}
		}
		<-s.release // a body that ignores its cancellation
		close(s.returned)
		return core.Outcome{Kind: core.Stopped}
	}))
	s.sid = s.n.NewSession("s")
	s.stuck = s.n.Admit(s.sid, "stuck")
	<-s.started
	return s
}

// interruptWithLateCommit interrupts the session and lets the grace period run
// out, so the interrupt commits directly; that commit is durable but meets
// a late IOERR, and inWait runs in each wait of its rerun for storage
// (the claim lock let go).
func (s *stuckExecution) interruptWithLateCommit(t *testing.T, inWait func()) {
	s.faults.FailLateCommits(1, faultvfs.IOErrFsync) // the interrupt's direct commit
	stopped := make(chan struct{})
	close(stopped) // the body was told to stop, and ignores it
	var err error
	s.tr.DriveEach(func() {
		err = interruptPastGrace(t, s.tr, s.n, s.sid, stopped)
	}, func(retry.Wait) { inWait() })
	require.NoError(t, err)
	require.Equal(t, 1, s.faults.LateCommits(), "the direct commit met its late IOERR")
}

// ended waits for the session to go idle and checks that the stuck turn
// ended interrupted, the turn of prompt next succeeded, and no claim is
// left.
func (s *stuckExecution) ended(t *testing.T, next string) {
	s.n.Idle()
	assert.Equal(t, "interrupted", s.tr.PromptState(s.stuck))
	assert.Equal(t, "succeeded", s.tr.PromptState(next))
	assert.False(t, s.tr.Claim(s.sid).Exists)
}
