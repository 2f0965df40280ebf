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

// A parent's turn that fails after starting a foreground child, before
// parking on it (its park refused by storage, a driver's failure), ends
// the child's job, and nothing waits for the child any more. The child's
// task turn, running here, is stopped once the failure committed, as an
// interrupt would stop it, and ends orphaned (docs/api.md); the sweep,
// which skips what runs here, would not reach it. Before, it went on
// calling the model and tools for nobody until its own end.
func TestFailedParentTurnStopsItsRunningChild(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		if x.Prompt() != "delegate, then fail" {
			return d.Run(ctx, x)
		}
		if _, err := x.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "hold", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents}); err != nil {
			return core.Outcome{Kind: core.Stopped}
		}
		<-d.Started // the child runs
		return core.Outcome{Kind: core.Failed, FailType: event.FailDriver, Message: "failed after starting a child"}
	}))
	root := n.NewSession("root")
	pid := n.Admit(root, "delegate, then fail")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only to fail instead of hanging
	defer cancel()
	require.NoError(t, n.Inst.WaitIdle(ctx), "the child's task turn was stopped")
	assert.Equal(t, "failed", tr.PromptState(pid))
	terms := treetest.Terminals(tr.Events(root + ".1"))
	require.Len(t, terms, 1, "the child's task turn ended")
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
	assert.Equal(t, event.ReasonOrphaned, in.Reason, "nothing waits for it")
	assert.False(t, tr.Claim(root+".1").Exists)
	assert.Equal(t, 1, d.Runs(), "the child ran once, and was not started again")
}
