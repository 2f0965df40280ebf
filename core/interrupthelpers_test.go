package core_test

// Scaffolding the interrupt tests share: the moments they ask a second
// interrupt, or admit the client's next prompt, at. Each helper sets the
// test hooks that make its moment deterministic; the tests keep their
// drivers, their faults and what they assert.

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// pendingInterrupt is an interrupt request running on its own goroutine.
type pendingInterrupt struct {
	done chan error
	did  bool // written before done is sent on
}

func newPendingInterrupt() *pendingInterrupt {
	return &pendingInterrupt{done: make(chan error, 1)}
}

// ask asks inst to interrupt sid on a goroutine of its own.
func (p *pendingInterrupt) ask(inst *core.Instance, sid string) {
	go func() {
		var err error
		p.did, err = inst.Interrupt(ctx, sid, event.ReasonUser)
		p.done <- err
	}()
}

// answer waits for the request to answer without error and returns
// whether it interrupted anything.
func (p *pendingInterrupt) answer(t *testing.T, what string) bool {
	t.Helper()
	require.NoError(t, within(t, p.done, what))
	return p.did
}

// secondAsk is a second interrupt of x's session, asked while an earlier
// interrupt's record of x's turn waited for storage.
type secondAsk struct {
	*pendingInterrupt
	next string // the prompt admitted in that wait, before the second request was asked
}

// askSecondWhileRecordWaits runs first, an interrupt of x's session whose
// record of x's turn (x's own, or the request's direct commit) meets the
// one late IOERR armed here, so that the record is durable but reported
// failed and its rerun waits for storage with x still registered. In that
// wait's first round it admits prompt to the session and asks a second
// interrupt of it, and returns once that request has told x to stop.
// onOther, if not nil, hears of every other execution an interrupt tells to
// stop.
func askSecondWhileRecordWaits(t *testing.T, tr *treetest.Tree, faults *faultvfs.Fault, n *treetest.Node,
	x *core.Execution, prompt string, onOther func(*core.Execution), first func() error) *secondAsk {
	t.Helper()
	// Set once prompt is admitted: then only the second request asks x.
	var asked chan *core.Execution
	var mu sync.Mutex
	t.Cleanup(core.SetInterruptAskedHook(n.Inst, func(e *core.Execution) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e != x:
			if onOther != nil {
				onOther(e)
			}
		case asked != nil:
			asked <- e
		}
	}))

	s := &secondAsk{pendingInterrupt: newPendingInterrupt()}
	faults.FailLateCommits(1, faultvfs.IOErrFsync)
	var err error
	tr.DriveEach(func() { err = first() }, func(retry.Wait) {
		if s.next != "" {
			return
		}
		require.Equal(t, "interrupted", tr.PromptState(x.PromptID()), "the first record is stored, reported failed")
		s.next = n.Admit(x.SessionID(), prompt)
		mu.Lock()
		asked = make(chan *core.Execution, 1)
		mu.Unlock()
		s.ask(n.Inst, x.SessionID())
		require.Same(t, x, <-asked, "the second request told x, still registered, to stop")
	})
	require.NoError(t, err)
	require.Equal(t, 1, faults.LateCommits(), "the first record met its late IOERR")
	require.NotEmpty(t, s.next, "admitted while the first record waited for storage")
	return s
}

// interruptBeforeRecord sets the hooks under which, once cx's finish has
// read how its turn ended and before it records that, the client's own
// interrupt of cx's session is asked on inst; then runs once that request
// has told cx to stop (on the drain goroutine: no FailNow in it).
func interruptBeforeRecord(t *testing.T, inst *core.Instance, cx *core.Execution, then func()) *pendingInterrupt {
	asked := make(chan struct{})
	t.Cleanup(core.SetInterruptAskedHook(inst, func(e *core.Execution) {
		if e == cx {
			close(asked)
		}
	}))
	p := newPendingInterrupt()
	t.Cleanup(core.SetFinishingHook(inst, func(e *core.Execution) {
		if e != cx {
			return
		}
		p.ask(inst, cx.SessionID())
		<-asked
		if then != nil {
			then()
		}
	}))
	return p
}

// sentAfter is the client's next prompt, sent right after an interrupt
// committed, and its turn.
type sentAfter struct {
	id   string
	turn *core.Execution
}

// admitOnceRecorded sets the hook under which, once x has recorded the
// interrupt of its turn and before the request looks again, the client's
// next prompt is admitted to x's session and its turn starts on d. The
// result is filled in then.
func admitOnceRecorded(t *testing.T, tr *treetest.Tree, n *treetest.Node, d *treetest.Driver, x *core.Execution) *sentAfter {
	after := &sentAfter{}
	t.Cleanup(core.SetInterruptStoppedHook(n.Inst, func(stopped *core.Execution) {
		if stopped != x || after.id != "" {
			return
		}
		require.Equal(t, "interrupted", tr.PromptState(x.PromptID()), "x recorded the interrupt")
		after.id = n.Admit(x.SessionID(), "hold: sent after the interrupt committed")
		after.turn = <-d.Started
	}))
	return after
}

// startChildTask admits a held prompt to a new root session on n, whose
// driver is d, and from its turn starts a child whose task turn runs
// prompt. It returns the root session, the child and that task turn.
func startChildTask(t *testing.T, n *treetest.Node, d *treetest.Driver, prompt string) (root string, child core.Child, cx *core.Execution) {
	t.Helper()
	root = n.NewSession("root")
	n.Admit(root, "hold")
	rx := within(t, d.Started, "the root's turn to start")
	child, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: prompt, MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	cx = within(t, d.Started, "the child's task turn to start")
	return root, child, cx
}
