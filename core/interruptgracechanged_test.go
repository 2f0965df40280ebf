package core_test

// An interrupt whose grace period ran out commits directly, and lets go of
// the claim lock while that commit waits for storage. The execution it
// told to stop may end meanwhile and record the interrupt itself; the
// direct commit then finds the session's execution changed and writes
// nothing. That record is the interrupt's: a prompt the client sent once
// it committed is not this request's to stop (DESIGN §6.4).

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

func TestDirectInterruptSparesAPromptSentAfterTheStoppedExecutionsOwnRecord(t *testing.T) {
	tr := treetest.New(t)
	faults := tr.Faults() // before the tree's database opens
	n, started, release, returned := bootStuckTurn(tr)
	sid := n.NewSession("s")
	stuck := n.Admit(sid, "stuck")
	x := within(t, started, "the stuck turn to start")

	faults.FailNext(1, faultvfs.Full) // the interrupt's direct commit is refused once
	stopped := make(chan struct{})
	close(stopped) // the body was told to stop, and ignores it
	var after string
	var afterTurn *core.Execution
	var err error
	tr.DriveEach(func() {
		err = interruptPastGrace(t, tr, n, sid, stopped)
	}, func(retry.Wait) {
		if after != "" {
			return
		}
		// In the direct commit's wait the body returns: x records the
		// interrupt itself and is gone. Then the client sends its next
		// prompt, whose turn starts here before the commit is tried again.
		close(release)
		within(t, returned, "the stuck body to return")
		within(t, x.Ended(), "x to record the interrupt and end")
		require.Equal(t, "interrupted", tr.PromptState(stuck), "x recorded the interrupt")
		after = n.Admit(sid, "sent after the interrupt committed")
		afterTurn = within(t, started, "the next prompt's turn to start")
	})
	require.NoError(t, err)
	require.NotNil(t, afterTurn, "the next prompt's turn started in the direct commit's wait")
	assert.Equal(t, 1, faults.Failed(), "the direct commit was refused once")

	assertSparedBesideXsRecord(t, tr, sid, x, stuck, after, afterTurn)
}

// The same, with x ending between the grace period running out and the
// request taking the claim lock to commit directly: it finds x gone, and
// x's own record is the interrupt's.
func TestInterruptPastGraceSparesAPromptSentAfterTheStoppedExecutionsOwnRecord(t *testing.T) {
	tr := treetest.New(t)
	n, started, release, returned := bootStuckTurn(tr)
	sid := n.NewSession("s")
	stuck := n.Admit(sid, "stuck")
	x := within(t, started, "the stuck turn to start")

	// Past the grace period, before the request takes the claim lock: the
	// body returns, x records the interrupt itself and is gone; then the
	// client sends its next prompt, whose turn starts here.
	var after string
	var afterTurn *core.Execution
	t.Cleanup(core.SetInterruptGraceUpHook(n.Inst, func(e *core.Execution) {
		if e != x || after != "" {
			return
		}
		// The hook runs in the interrupt's goroutine: a wait that times
		// out returns, and the interrupt answers.
		close(release)
		if _, ok := received(t, returned, "the stuck body to return"); !ok {
			return
		}
		if _, ok := received(t, x.Ended(), "x to record the interrupt and end"); !ok {
			return
		}
		after = n.Admit(sid, "sent after the interrupt committed")
		afterTurn, _ = received(t, started, "the next prompt's turn to start")
	}))
	stopped := make(chan struct{})
	close(stopped) // the body was told to stop, and ignores it
	require.NoError(t, interruptPastGrace(t, tr, n, sid, stopped))
	require.NotNil(t, afterTurn, "the next prompt's turn started before the request took the claim lock")
	assert.Equal(t, "interrupted", tr.PromptState(stuck), "x recorded the interrupt")

	assertSparedBesideXsRecord(t, tr, sid, x, stuck, after, afterTurn)
}

// bootStuckTurn boots a node whose "stuck" prompt's body ignores its
// cancellation until release is closed (returned closes as it returns);
// every other body stops when told. started receives each execution.
func bootStuckTurn(tr *treetest.Tree) (n *treetest.Node, started chan *core.Execution, release, returned chan struct{}) {
	started = make(chan *core.Execution, 4)
	release, returned = make(chan struct{}), make(chan struct{})
	n = tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		started <- x
		if x.Prompt() == "stuck" {
			<-release
			close(returned)
			return core.Outcome{Kind: core.Stopped}
		}
		<-ctx.Done()
		return core.Outcome{Kind: core.Stopped}
	}))
	return n, started, release, returned
}

// assertSparedBesideXsRecord: the prompt admitted after x recorded the
// interrupt runs on, its turn never told to stop, and x's record of the
// interrupt (of prompt stuck) is the session's only turn end: nothing of
// the request's own commit.
func assertSparedBesideXsRecord(t *testing.T, tr *treetest.Tree, sid string, x *core.Execution, stuck, after string, afterTurn *core.Execution) {
	t.Helper()
	assert.Equal(t, "running", tr.PromptState(after), "admitted after the interrupt committed: its turn goes on")
	select {
	case <-afterTurn.Cancelled():
		t.Error("the interrupt told the next prompt's turn to stop")
	default:
	}
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, 1, "x's own record of the interrupt, and nothing of the request's commit")
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, x.ID(), in.ExecutionID)
	assert.Equal(t, stuck, in.PromptID)
}
