package core_test

// An interrupt that storage refuses answers 503, but the execution it told
// to stop cannot go on: it records the interrupt itself once storage takes
// writes again, after the client has had its error and maybe sent more.

import (
	"context"
	"errors"
	"strings"
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

// lateInterrupt runs a turn ("hold") with one prompt queued behind it,
// then an interrupt that storage refuses for its whole write window. Once
// the interrupt has answered its error, while the stopped execution waits
// to try its own record of the interrupt again, storage comes back and
// the client acts (act, if not nil). Then the record lands.
//
// The stopped execution is held before its record until the interrupt
// has answered: two writes waiting out one outage on one fake clock would
// race, and the execution could spend its whole settlement schedule
// before the interrupt's own write window ran out.
func lateInterrupt(t *testing.T, act func(n *treetest.Node, sid string)) (tr *treetest.Tree, n *treetest.Node, d *treetest.Driver, sid, running, queued string, x *core.Execution) {
	t.Helper()
	tr, f, d, n := faultTree(t, 4)
	sid, running, queued, x = lateInterruptOn(t, tr, n, d, "hold", func() { f.FailFor(time.Hour, faultvfs.Full) }, f.Heal, act)
	return tr, n, d, sid, running, queued, x
}

// lateInterruptOf is lateInterrupt with the node's driver wrap(d) and its
// turn's prompt text first, which runs on d.
func lateInterruptOf(t *testing.T, wrap func(d *treetest.Driver) core.Driver, first string, act func(n *treetest.Node, sid string)) (tr *treetest.Tree, n *treetest.Node, d *treetest.Driver, sid, running, queued string, x *core.Execution) {
	t.Helper()
	tr = treetest.New(t)
	f := tr.Faults()
	d = treetest.NewDriver(4)
	n = tr.Boot(wrap(d))
	sid, running, queued, x = lateInterruptOn(t, tr, n, d, first, func() { f.FailFor(time.Hour, faultvfs.Full) }, f.Heal, act)
	return tr, n, d, sid, running, queued, x
}

// lateInterruptOn is lateInterrupt on a given tree, node and driver, with
// the turn's prompt text first and the outage that fail starts and heal
// ends.
func lateInterruptOn(t *testing.T, tr *treetest.Tree, n *treetest.Node, d *treetest.Driver, first string, fail, heal func(), act func(n *treetest.Node, sid string)) (sid, running, queued string, x *core.Execution) {
	t.Helper()
	sid = n.NewSession("s")
	running = n.Admit(sid, first)
	x = <-d.Started
	queued = n.Admit(sid, "queued before the interrupt")

	stopped, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(core.SetFinishingHook(n.Inst, func(e *core.Execution) {
		if e == x {
			close(stopped)
			<-release
		}
	}))
	fail()
	answered, acted := make(chan struct{}), make(chan struct{})
	var ierr error
	tr.DriveEach(func() {
		ierr = interruptPastGrace(t, tr, n, sid, stopped) // its direct commit refused for the whole write window
		close(answered)
		close(release)
		<-acted
	}, func(w retry.Wait) {
		select {
		case <-answered:
		default:
			return
		}
		select {
		case <-acted:
			return
		default:
		}
		// The execution announced its first wait and has not tried again.
		require.Equal(t, "running", tr.PromptState(running), "nothing stored yet")
		heal()
		if act != nil {
			act(n, sid)
		}
		close(acted)
	})
	require.ErrorIs(t, ierr, core.ErrStorageUnavailable, "the interrupt answers 503")
	return sid, running, queued, x
}

// interruptPastGrace interrupts session sid's turn and returns the
// interrupt's answer, once the execution it told to stop has reached
// stopped and the interrupt's grace period has passed on the fake clock.
// Callers run it off the test's goroutine (Drive), so a wait that never
// ends marks the test failed and returns an error instead of hanging
// (received).
func interruptPastGrace(t *testing.T, tr *treetest.Tree, n *treetest.Node, sid string, stopped <-chan struct{}) error {
	t.Helper()
	timers := tr.Clock.Pending()
	answered := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		answered <- err
	}()
	if _, ok := received(t, stopped, "the execution the interrupt told to stop to reach its stop"); !ok {
		return errors.New("interruptPastGrace: the execution never stopped")
	}
	armed := make(chan struct{})
	go func() {
		tr.Clock.BlockUntil(timers + 1) // the interrupt's grace period
		close(armed)
	}()
	if _, ok := received(t, armed, "the interrupt to set its grace timer"); !ok {
		return errors.New("interruptPastGrace: no grace timer")
	}
	tr.Clock.Advance(core.DefaultInterruptGrace)
	err, ok := received(t, answered, "the interrupt to answer past its grace period")
	if !ok {
		return errors.New("interruptPastGrace: the interrupt never answered")
	}
	return err
}

// A client whose interrupt answered 503 sends its next prompt. The late
// record of the interrupt still stops the turn and cancels what was queued
// when the interrupt was asked, but not that prompt: it was admitted after
// the interrupt's answer, and runs next.
func TestLateInterruptKeepsAPromptSentAfterItsError(t *testing.T) {
	var after string
	tr, n, d, sid, running, queued, x := lateInterrupt(t, func(n *treetest.Node, sid string) {
		after = n.Admit(sid, "sent after the interrupt's 503")
	})
	n.IdleDriving()

	assert.Equal(t, "interrupted", tr.PromptState(running), "the execution told to stop recorded the interrupt")
	assert.Equal(t, "cancelled", tr.PromptState(queued), "queued when the interrupt was asked")
	assert.Equal(t, "succeeded", tr.PromptState(after), "admitted after the interrupt answered: kept, and run")
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, 2)
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, x.ID(), in.ExecutionID)
	assert.Equal(t, event.ReasonUser, in.Reason)
	assert.Equal(t, event.ExecutionSucceeded, terms[1].Type)
	assert.Equal(t, 2, d.Runs())
	assert.False(t, tr.Claim(sid).Exists)
}

// The same, with the process killed right after the late record: the
// prompt it kept holds the claim, and the next boot runs it.
func TestLateInterruptsKeptPromptSurvivesAKill(t *testing.T) {
	var after string
	tr, n, d, _, running, queued, _ := lateInterrupt(t, func(n *treetest.Node, sid string) {
		after = n.Admit(sid, "hold: sent after the interrupt's 503")
	})
	tr.Drive(func() { <-d.Started }) // the late record started it here
	require.Equal(t, "interrupted", tr.PromptState(running))
	require.Equal(t, "running", tr.PromptState(after), "the late record started it")
	n.Crash()

	d2 := treetest.NewDriver(2)
	n2 := tr.Boot(d2)
	x := <-d2.Started
	assert.Equal(t, after, x.PromptID(), "the boot resumes the kept prompt")
	d2.Release()
	n2.Idle()
	assert.Equal(t, "cancelled", tr.PromptState(queued))
	assert.Equal(t, "succeeded", tr.PromptState(after))
}

// A second interrupt asked while the execution still waits to record the
// first one is answered as usual: the record comes before its answer and
// cancels everything queued, the prompt sent after the first one's error
// included.
func TestLateInterruptWithAnotherWaitingCancelsTheWholeQueue(t *testing.T) {
	var after string
	var did bool
	var err error
	answered := make(chan struct{})
	tr, n, d, sid, running, queued, _ := lateInterrupt(t, func(n *treetest.Node, sid string) {
		after = n.Admit(sid, "sent after the interrupt's 503")
		asked := make(chan struct{}, 1)
		defer core.SetInterruptAskedHook(n.Inst, func(*core.Execution) { asked <- struct{}{} })()
		go func() {
			defer close(answered)
			did, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		}()
		<-asked // before the execution tries its record again
	})
	n.IdleDriving()
	<-answered
	require.NoError(t, err)
	assert.True(t, did)

	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued))
	assert.Equal(t, "cancelled", tr.PromptState(after), "queued when the second interrupt was asked")
	assert.Equal(t, 1, d.Runs())
	assert.False(t, tr.Claim(sid).Exists)
}

// The late record of an interrupt ends the turn's foreground children's
// jobs, and no interrupt request is left to stop their executions: the
// record stops them itself, as a failed turn's does. Before, a child
// running here went on calling the model for nobody until its own end.
func TestLateInterruptStopsTheTurnsRunningChild(t *testing.T) {
	childStopped := make(chan struct{})
	delegate := func(d *treetest.Driver) core.Driver {
		return core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
			if strings.Contains(x.SessionID(), ".") {
				// The child's task turn holds until it is stopped.
				<-ctx.Done()
				close(childStopped)
				return core.Outcome{Kind: core.Stopped}
			}
			if x.Prompt() == "hold: delegate" {
				if _, err := x.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "work", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents}); err != nil {
					return core.Outcome{Kind: core.Stopped}
				}
			}
			return d.Run(ctx, x)
		})
	}
	tr, n, _, sid, running, _, _ := lateInterruptOf(t, delegate, "hold: delegate", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.IdleDriving()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("the child's task turn still runs after its parent's late interrupt")
	}
	<-childStopped
	assert.Equal(t, "interrupted", tr.PromptState(running))
	terms := treetest.Terminals(tr.Events(sid + ".1"))
	require.Len(t, terms, 1, "the child's task turn ended")
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
	assert.Equal(t, event.ReasonOrphaned, in.Reason, "nothing waits for it")
	assert.False(t, tr.Claim(sid+".1").Exists)
}

// The instance starts to stop after the interrupt answered its error and
// the client sent its next prompt, before the late record: the record
// starts no turn here, and keeps the claim for the prompt it spared, so
// the next boot runs it.
func TestLateInterruptWhileStoppingKeepsTheClaimForItsKeptPrompt(t *testing.T) {
	tr, f, d, n := faultTree(t, 4)
	sid := n.NewSession("s")
	running := n.Admit(sid, "hold")
	x := <-d.Started
	queued := n.Admit(sid, "queued before the interrupt")
	stopped, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(core.SetFinishingHook(n.Inst, func(e *core.Execution) {
		if e == x {
			close(stopped)
			<-release
		}
	}))
	f.FailFor(time.Hour, faultvfs.Full)
	var ierr error
	var after string
	tr.Drive(func() {
		ierr = interruptPastGrace(t, tr, n, sid, stopped)
		f.Heal()
		after = n.Admit(sid, "sent after the interrupt's 503")
		gone, cancel := context.WithCancel(ctx)
		cancel()
		require.Error(t, n.Inst.Close(gone), "the instance is stopping; x has not ended")
		close(release)
	})
	require.ErrorIs(t, ierr, core.ErrStorageUnavailable)
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued))
	assert.Equal(t, "queued", tr.PromptState(after), "admitted after the interrupt answered: kept")
	assert.True(t, tr.Claim(sid).Exists, "the kept prompt holds the claim")
	assert.Equal(t, 1, d.Runs())

	n.Crash()
	d2 := treetest.NewDriver(1)
	n2 := tr.Boot(d2)
	select {
	case x2 := <-d2.Started:
		assert.Equal(t, after, x2.PromptID(), "the next boot runs the kept prompt")
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("the next boot did not run the kept prompt")
	}
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(after))
}
