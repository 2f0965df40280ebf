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

// The start drain makes once a turn's execution is gone (startWanted) is a
// write like any other start: under the claim lock, which its wait for
// storage lets go and takes back. A prompt admitted while the turn's
// terminal waits for its rerun (a late IOERR) is started by drain; that
// start's own write is refused once, so it waits too. Made outside the
// claim lock, that wait would unlock a mutex nobody holds (a fatal error),
// and the sweep could see the claim without its execution.
func TestTheStartAfterAnExecutionEndsWaitsForStorageUnderTheClaimLock(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	d := lateDriver{f: f, started: make(chan *core.Execution, 4)}
	n := tr.Boot(d)
	sid := n.NewSession("s")
	var first, next string
	var started *core.Execution
	waits := 0
	tr.DriveEach(func() {
		first = n.Admit(sid, "end")
		<-d.started
		select {
		case started = <-d.started:
			n.Idle()
		case <-time.After(30 * time.Second): // only to fail instead of hanging
		}
	}, func(retry.Wait) {
		waits++
		if waits == 1 {
			// The terminal's rerun waits: admit, and refuse the next write,
			// the start drain makes once the rerun found its record stored.
			next = n.Admit(sid, "next")
			f.FailNext(1, faultvfs.IOErrWrite)
		}
	})
	require.Equal(t, 1, f.LateCommits(), "the terminal met its late IOERR")
	require.Equal(t, 2, waits, "the terminal's rerun and the start's retry")
	require.NotNil(t, started, "the admitted prompt's turn waits for the next wake-up")
	assert.Equal(t, next, started.PromptID())
	assert.Equal(t, "succeeded", tr.PromptState(first))
	assert.Equal(t, "succeeded", tr.PromptState(next))
	assert.False(t, tr.Claim("s").Exists)
}

// An execution stuck past the interrupt's grace period keeps its claim,
// and stays registered here, when storage refuses the interrupt's direct
// commit for the whole write schedule: only a commit that landed fences
// its writes. Forgotten anyway, the session would look idle while its body
// runs, and idle eviction or a sweep could slip in beside it.
func TestADirectInterruptThatStorageRefusedLeavesTheStuckExecutionRegistered(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	started := make(chan *core.Execution, 4)
	release := make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		<-release // a body that ignores its cancellation
		return core.Outcome{Kind: core.Stopped}
	}))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "stuck")
	<-started

	var err error
	tr.DriveEach(func() {
		timers := tr.Clock.Pending()
		answered := make(chan error, 1)
		go func() {
			_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
			answered <- err
		}()
		tr.Clock.BlockUntil(timers + 1) // the interrupt's grace period
		f.FailFor(24*time.Hour, faultvfs.Full)
		tr.Clock.Advance(core.DefaultInterruptGrace)
		err = <-answered
	}, nil)
	require.ErrorIs(t, err, core.ErrStorageUnavailable)
	assert.True(t, n.Inst.RunningHere(sid), "the stuck execution keeps the claim")

	f.Heal()
	close(release)
	n.IdleDriving()
	assert.Equal(t, "interrupted", tr.PromptState(pid), "the stopped execution recorded the interrupt itself")
	assert.False(t, tr.Claim(sid).Exists)
}

// A start of a session whose claim names an execution starts nothing: the
// turn sleeps on a scheduled retry (or its execution died, recovery's to
// decide). A reply's, a child's or an interrupt's start that found such a
// claim must not cut the sleep short with a new execution.
func TestAStartLeavesATurnSleepingOnItsRetry(t *testing.T) {
	tr := treetest.New(t)
	started := make(chan *core.Execution, 4)
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		return core.Outcome{Kind: core.RetryLater, RetryAt: x.Clock().Now() + time.Hour.Milliseconds(), Attempt: 1, Message: "rate limited"}
	}))
	sid := n.NewSession("s")
	n.Admit(sid, "go")
	x := <-started
	n.Idle()
	require.Equal(t, x.ID(), tr.Claim(sid).ExecutionID, "the claim keeps the sleeping execution")

	n.Inst.StartForTest(ctx, sid, event.CauseResolution)
	assert.False(t, n.Inst.RunningHere(sid), "nothing starts before the retry is due")
	assert.Empty(t, started)
	assert.Equal(t, x.ID(), tr.Claim(sid).ExecutionID)
}

// A step of an execution stuck past the interrupt's grace period is cut
// "stopped" by the interrupt's direct commit (the execution was stopped
// here), with its checkpoint's text; "interrupted" is for a turn whose
// execution died.
func TestDirectInterruptCutsTheStuckExecutionsStepStopped(t *testing.T) {
	tr := treetest.New(t)
	const stepID = "step-stuck"
	appended, release, returned := make(chan error, 1), make(chan struct{}), make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		defer close(returned)
		_, err := x.Append(ctx, true,
			core.NewEvent{Type: event.StepStarted, Payload: event.StepBegun{StepID: stepID, ExecutionID: x.ID(), PromptID: x.PromptID(), Index: 1}},
			core.NewEvent{Type: event.TextCheckpoint, Payload: event.Checkpoint{StepID: stepID, Text: "alpha "}})
		appended <- err
		<-release // a body that ignores its cancellation
		return core.Outcome{Kind: core.Stopped}
	}))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "stream")
	require.NoError(t, <-appended)

	closed := make(chan struct{})
	close(closed)
	require.NoError(t, interruptPastGrace(t, tr, n, sid, closed), "committed directly past the grace period")
	close(release)
	<-returned
	require.Equal(t, "interrupted", tr.PromptState(pid))

	cuts := treetest.OfType(tr.Events(sid), event.StepCut)
	require.Len(t, cuts, 1)
	var c event.Cut
	require.NoError(t, cuts[0].Decode(&c))
	assert.Equal(t, "alpha ", c.Text)
	assert.Equal(t, event.CutStopped, c.Reason)
}

// While a turn's terminal, committed but reported failed, waits for its
// rerun, its execution is still the session's here, and a session runs one
// execution at a time: a prompt admitted in that wait takes the claim but
// starts nothing beside it (startLocked only notes the start as wanted).
// The claim names no execution until the first one is gone; then drain
// starts the prompt's turn. Started at once instead, its turn would run
// while the first execution still finishes (its children stopped after a
// failed turn, its parent told, after the next turn began).
func TestAPromptAdmittedWhileAnExecutionFinishesStartsNothingBesideIt(t *testing.T) {
	var next string
	var during []core.ClaimState
	tr, n, first, d := lateRecord(t, "end", func(n *treetest.Node, sid string) {
		next = n.Admit(sid, "next")
		var err error
		during, err = n.Inst.Claims(ctx)
		require.NoError(t, err)
	})
	require.Len(t, during, 1, "the admission took the claim")
	assert.Empty(t, during[0].ExecutionID, "a second execution began while the first was still registered")
	assert.Equal(t, "succeeded", tr.PromptState(first))
	x := startsNext(t, d, "the admitted prompt's turn")
	assert.Equal(t, next, x.PromptID())
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(next))
}
