package core_test

// More interleavings of the late interrupt (lateinterrupt_test.go): an
// interrupt that answered its error while the execution it told to stop
// records the interrupt itself later.

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
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// lastSeqQuery is the read of a session's last seq: every append's, and
// the one an interrupt that gives up makes for its cutoff.
const lastSeqQuery = `SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?`

// An outage in which storage cannot even tell the session's last seq: the
// interrupt gives up, and so does its read of the cutoff. The execution's
// late record must still spare the prompt the client sent after the 503,
// though nothing says which prompts came before it: it cancels none.
func TestLateInterruptWithTheSeqUnreadableKeepsAPromptSentAfterIts503(t *testing.T) {
	tr := treetest.New(t)
	faults := &failQuery{match: func(q string) bool { return q == lastSeqQuery }}
	tr.WrapDB = func(db storage.DB) storage.DB { faults.DB = db; return faults }
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	var after string
	_, running, queued, _ := lateInterruptOn(t, tr, n, d, "hold",
		func() { faults.failNext(1<<30, &storage.Error{Code: storage.CodeIOErr, Msg: "injected"}) },
		func() { faults.failNext(0, nil) },
		func(n *treetest.Node, sid string) { after = n.Admit(sid, "sent after the interrupt's 503") })
	n.IdleDriving()

	assert.Equal(t, "interrupted", tr.PromptState(running), "the execution told to stop recorded the interrupt")
	assert.Equal(t, "succeeded", tr.PromptState(after), "admitted after the interrupt answered: kept, and run")
	assert.Equal(t, "succeeded", tr.PromptState(queued), "nothing told the record it was queued before the 503")
	require.Equal(t, 3, d.Runs())
}

// A late interrupt of a root whose turn started a foreground child: the
// record ends the child's job, and with no request left to stop the
// child's task turn, the drain stops it before the session's next turn
// (the prompt sent after the 503) runs, so that turn's work is not taken
// for the interrupted one's, and nothing goes on below for nobody.
func TestLateInterruptStopsTheRootsChildBeforeTheKeptPromptRuns(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	d, dc := treetest.NewDriver(4), treetest.NewDriver(4) // the root's, the child's
	var n *treetest.Node
	childRan := make(chan bool, 1) // whether the child still ran when the kept prompt's turn started
	n = tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		switch {
		case strings.Contains(x.SessionID(), "."):
			return dc.Run(ctx, x)
		case x.Prompt() == "hold":
			if _, err := x.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "hold: the child", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents}); err != nil {
				return core.Outcome{Kind: core.Stopped}
			}
			<-dc.Started // the child runs
		default:
			childRan <- n.Inst.RunningHere("s.1")
		}
		return d.Run(ctx, x)
	}))
	var after string
	_, running, queued, _ := lateInterruptOn(t, tr, n, d, "hold", func() { f.FailFor(time.Hour, faultvfs.Full) }, f.Heal,
		func(n *treetest.Node, sid string) { after = n.Admit(sid, "sent after the interrupt's 503") })
	var ran bool
	tr.Drive(func() { ran = <-childRan })
	assert.False(t, ran, "the child's task turn was stopped before the next turn of its parent ran")
	dc.Release() // should it still run, let it end
	n.IdleDriving()

	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued))
	assert.Equal(t, "succeeded", tr.PromptState(after))
	terms := treetest.Terminals(tr.Events("s.1"))
	require.Len(t, terms, 1, "the child's task turn ended")
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type, "stopped, not run to its end")
	assert.Len(t, treetest.OfType(tr.Events("s"), event.JobEnded), 1)
	assert.False(t, tr.Claim("s.1").Exists)
	assert.False(t, tr.Claim("s").Exists)
	assert.Equal(t, 1, dc.Runs())
}

// A kill after the interrupt's 503, before the stopped execution's own
// record landed: the 503 stored nothing, so the next boot resumes the
// turn as after any crash, and every prompt, queued before the interrupt
// or sent after its 503, keeps its place and runs once.
func TestAKillBeforeTheLateRecordResumesTheTurnAndCancelsNothing(t *testing.T) {
	var after string
	tr, _, _, sid, running, queued, _ := lateInterrupt(t, func(n *treetest.Node, sid string) {
		after = n.Admit(sid, "sent after the interrupt's 503")
		n.Crash() // the execution still waits to try its record again
	})
	require.Equal(t, "running", tr.PromptState(running), "the interrupt never landed")

	d2 := treetest.NewDriver(4)
	n2 := tr.Boot(d2)
	x := <-d2.Started
	assert.Equal(t, running, x.PromptID(), "the boot resumes the turn the 503 left")
	assert.Equal(t, event.CauseResume, x.Cause())
	d2.Release()
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(running))
	assert.Equal(t, "succeeded", tr.PromptState(queued))
	assert.Equal(t, "succeeded", tr.PromptState(after))
	assert.Empty(t, treetest.OfType(tr.Events(sid), event.PromptCancelled))
	assert.Equal(t, 3, d2.Runs())
}

// Two requests give up on one execution, the second after the client
// sent a prompt between them: the record cancels what was queued when
// the later of them answered, that prompt included, and keeps only what
// came after both answers.
func TestLateInterruptCutsAtTheLastRequestThatGaveUp(t *testing.T) {
	var between, after string
	var berr error
	tr, n, d, _, running, queued, _ := lateInterrupt(t, func(n *treetest.Node, sid string) {
		between = n.Admit(sid, "sent after the first interrupt's 503")
		asked := make(chan struct{}, 1)
		defer core.SetInterruptAskedHook(n.Inst, func(*core.Execution) { asked <- struct{}{} })()
		bctx, cancel := context.WithCancel(context.Background())
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			_, berr = n.Inst.Interrupt(bctx, sid, event.ReasonUser)
		}()
		<-asked
		cancel() // the second request gives up too, before the record
		<-answered
		after = n.Admit(sid, "sent after the second interrupt gave up")
	})
	require.ErrorIs(t, berr, context.Canceled)
	n.IdleDriving()

	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued))
	assert.Equal(t, "cancelled", tr.PromptState(between), "queued when the second request gave up")
	assert.Equal(t, "succeeded", tr.PromptState(after), "sent after both answers: kept, and run")
	assert.Equal(t, 2, d.Runs())
}

// Storage that does not come back within the settlement window: the
// interrupt answered its error, the stopped execution's record of it
// spent the whole window, and the tree turned read-only. Nothing was
// stored, so once storage returns the sweep resumes the turn, as after
// a crash, and the queued prompt keeps its place.
func TestALateRecordThatNeverLandsLeavesTheTurnToBeResumed(t *testing.T) {
	tr, f, d, n, sid, running, queued := turnMeetsAnOutage(t, 24*time.Hour)

	var err error
	tr.Drive(func() {
		_, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		n.Idle() // the execution gives up its record too
	})
	require.Error(t, err, "the interrupt answers 503")
	require.True(t, n.Inst.ReadOnly(), "the record spent the settlement window")
	require.True(t, tr.Claim(sid).Exists)
	require.Equal(t, "running", tr.PromptState(running), "nothing stored")

	f.Heal()
	d.Release()
	rep, err := recovery.Wake(ctx, n.Inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Resume), "resumed, as after a crash")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(running))
	assert.Equal(t, "succeeded", tr.PromptState(queued))
	assert.Empty(t, treetest.OfType(tr.Events(sid), event.PromptCancelled))
}

// An interrupt whose client leaves (its context ends) before the execution
// it told to stop records anything gives up, and still reads its cutoff:
// that read waits out storage blips, as the context that ended was the
// client's, not the read's. The execution's late record then cancels the
// prompt queued before the interrupt, as any late record does.
func TestLateInterruptOfAClientThatLeftReadsItsCutoffPastBlips(t *testing.T) {
	tr := treetest.New(t)
	faults := &failQuery{match: func(q string) bool { return q == lastSeqQuery }}
	tr.WrapDB = func(db storage.DB) storage.DB { faults.DB = db; return faults }
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	running := n.Admit(sid, "stubborn") // stops only once released
	x := <-d.Started
	queued := n.Admit(sid, "queued before the interrupt")

	asked := make(chan struct{})
	t.Cleanup(core.SetInterruptAskedHook(n.Inst, func(e *core.Execution) {
		if e == x {
			close(asked)
		}
	}))
	ictx, leave := context.WithCancel(ctx)
	answered := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ictx, sid, event.ReasonUser)
		answered <- err
	}()
	<-asked
	// Several blips: a read made with the client's ended context gives
	// up at the first of them, while a wait may also see its timer fire.
	faults.failNext(5, &storage.Error{Code: storage.CodeIOErr, Msg: "injected"})
	leave()
	var err error
	waits := tr.Drive(func() { err = <-answered })
	require.ErrorIs(t, err, context.Canceled, "the client left")
	require.Len(t, waits, 5, "the cutoff's read met the blips and waited them out")

	d.Release()
	n.IdleDriving()
	assert.Equal(t, "interrupted", tr.PromptState(running), "the execution told to stop recorded the interrupt")
	assert.Equal(t, "cancelled", tr.PromptState(queued), "queued before the interrupt was asked")
	assert.Equal(t, 1, d.Runs())
}

// Two requests give up on one execution, the later of them unable even to
// read the session's last seq: its answer says nothing of which prompts
// came before it, so it takes nothing from the earlier one's cutoff. The
// record still cancels what was queued when the first request answered.
func TestLateInterruptKeepsAnEarlierCutoffOverALaterUnreadableOne(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	seq := &failQuery{match: func(q string) bool { return q == lastSeqQuery }}
	tr.WrapDB = func(db storage.DB) storage.DB { seq.DB = db; return seq }
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	var berr error
	_, running, queued, _ := lateInterruptOn(t, tr, n, d, "hold", func() { f.FailFor(time.Hour, faultvfs.Full) }, f.Heal,
		func(n *treetest.Node, sid string) {
			asked := make(chan struct{}, 1)
			defer core.SetInterruptAskedHook(n.Inst, func(*core.Execution) { asked <- struct{}{} })()
			bctx, cancel := context.WithCancel(context.Background())
			answered := make(chan struct{})
			go func() {
				defer close(answered)
				_, berr = n.Inst.Interrupt(bctx, sid, event.ReasonUser)
			}()
			<-asked
			seq.failNext(1, errors.New("injected: the last seq is unreadable"))
			cancel() // the second request gives up, and cannot read its cutoff
			<-answered
		})
	require.ErrorIs(t, berr, context.Canceled)
	n.IdleDriving()

	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued), "queued before the first request answered")
	assert.Equal(t, 1, d.Runs())
}
