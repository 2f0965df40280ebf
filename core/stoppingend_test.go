package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A turn that ends succeeded while the instance is stopping (Close), with
// a prompt queued behind it, does not start that prompt here, and must keep
// the claim for it (DESIGN §6: an open prompt always has a claim). The next
// boot on the same tree then starts the queued turn as a fresh start (cause
// "prompt", no resume counted). The hook holds finish after it read that
// the execution ended succeeded (no cancel cause yet) until Close has
// cancelled it, so the end is recorded with startNext=false.
func TestTurnEndingWhileClosingKeepsClaimForQueuedPrompt(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	closed := make(chan error, 1)
	n := tr.Boot(d)
	inst := n.Inst
	defer core.SetFinishingHook(n.Inst, func(x *core.Execution) {
		if x.Prompt() != "hold first" {
			return
		}
		go func() { closed <- inst.Close(context.Background()) }()
		<-x.Cancelled() // Close has marked the instance closed
	})()
	sid := n.NewSession("s")
	first := n.Admit(sid, "hold first")
	x := <-d.Started
	require.Equal(t, "hold first", x.Prompt())
	second := n.Admit(sid, "second") // queued behind the first
	d.Release()

	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("Close never returned")
	}
	assert.Equal(t, "succeeded", tr.PromptState(first), "the first turn's end was recorded")
	require.Equal(t, "queued", tr.PromptState(second), "a stopping instance starts nothing")
	c := tr.Claim(sid)
	require.True(t, c.Exists, "the queued prompt keeps the claim")
	assert.Empty(t, c.ExecutionID, "held afresh, without an execution")
	assert.Zero(t, c.Attempts)
	assert.Len(t, d.Started, 0, "the queued turn did not start on the stopping instance")

	// The next boot on the same tree starts the queued turn, as a start.
	n2 := tr.Boot(d)
	var x2 *core.Execution
	select {
	case x2 = <-d.Started:
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("the queued prompt never ran after the reboot")
	}
	assert.Equal(t, "second", x2.Prompt())
	assert.Equal(t, event.CausePrompt, x2.Cause(), "a start, not a resume")
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(second))
	assert.Empty(t, treetest.OfType(tr.Events(sid), event.ExecutionResumed), "no resume was counted")
	assert.False(t, tr.Claim(sid).Exists)
}

// parkOnEndedChild is a driver whose root turn starts a foreground child,
// waits until the child's turn has ended (its terminal published), then
// parks on the child's task blocker, already resolvable; the child and the
// root's continuation answer at once.
type parkOnEndedChild struct{ inst **core.Instance }

func (d parkOnEndedChild) Run(ctx context.Context, x *core.Execution) core.Outcome {
	if x.SessionID() != "root" || x.Cause() == event.CauseResolution {
		return treetest.Answer(ctx, x)
	}
	sub := (*d.inst).Subscribe("root.1", 64)
	defer sub.Close()
	c, err := x.StartChild(ctx, core.ChildSpec{CallID: "call_task", Prompt: "look", MaxDepth: core.DefaultTaskDepth, MaxChildren: core.DefaultMaxSubagents})
	if err != nil {
		return core.Outcome{Kind: core.Stopped}
	}
	for ended := false; !ended; {
		select {
		case ev := <-sub.C:
			ended = ev.IsTerminal()
		case <-time.After(30 * time.Second): // only to fail instead of hanging
			return core.Outcome{Kind: core.Stopped}
		}
	}
	b, err := core.TaskBlocker("call_task", 0, c)
	if err != nil {
		return core.Outcome{Kind: core.Stopped}
	}
	return core.Outcome{Kind: core.Parked, Park: &event.Parked{StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID(), Blockers: []event.Blocker{b}}}
}

// A step that parks while the instance is stopping, on a child whose turn
// has already ended, is resolved by its own park (resolveEndedTasks): the
// turn is owed its continuation, which a stopping instance does not
// start, so it must keep the claim, without an execution, for the next
// boot to continue it (cause resolution), not release it as a parked
// turn's would be: nothing would ever continue the turn.
func TestParkWhileClosingOnAnEndedChildKeepsTheClaim(t *testing.T) {
	tr := treetest.New(t)
	closed := make(chan error, 1)
	var inst *core.Instance
	n := tr.Boot(parkOnEndedChild{inst: &inst})
	inst = n.Inst
	defer core.SetFinishingHook(n.Inst, func(x *core.Execution) {
		if x.SessionID() != "root" || x.Cause() != event.CausePrompt {
			return
		}
		go func() { closed <- inst.Close(context.Background()) }()
		<-x.Cancelled() // Close has marked the instance closed
	})()
	n.NewSession("root")
	pid := n.Admit("root", "start a child")
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("Close never returned")
	}
	require.Len(t, treetest.OfType(tr.Events("root"), event.TaskResolved), 1, "the park found its child ended")
	c := tr.Claim("root")
	require.True(t, c.Exists, "the resolved turn keeps the claim")
	assert.Empty(t, c.ExecutionID, "held afresh, without an execution")

	n2 := tr.Boot(parkOnEndedChild{inst: &inst})
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid), "the next boot continued the turn")
	causes := startCauses(t, tr.Events("root"))
	assert.Equal(t, []string{event.CausePrompt, event.CauseResolution}, causes)
}
