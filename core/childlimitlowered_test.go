package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A tree that holds more children than its limit allows (an operator
// lowered max_subagents while the tree ran, or a host booted it with a
// smaller one) takes no more: the limit is a ceiling, not a count to
// reach exactly, and the refusal names the tree's children and the limit
// as they are. A call that has its child already still re-attaches.
func TestStartChildRefusesATreePastALoweredLimit(t *testing.T) {
	ctx := context.Background()
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	root := n.NewSession("root")
	n.Admit(root, "hold")
	rx := <-d.Started
	spec := func(callID string, limit int) core.ChildSpec {
		return core.ChildSpec{CallID: callID, Prompt: "hold", MaxDepth: 3, MaxChildren: limit}
	}
	var first core.Child
	for i, callID := range []string{"call-1", "call-2", "call-3"} {
		c, err := rx.StartChild(ctx, spec(callID, 3))
		require.NoError(t, err)
		<-d.Started // the child's turn
		if i == 0 {
			first = c
		}
	}

	_, err := rx.StartChild(ctx, spec("call-4", 2))
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "this session tree already has 3 sub-agents, the most it may hold (max_subagents 2)")
	sessions, err := n.Inst.Sessions(ctx)
	require.NoError(t, err)
	assert.Len(t, sessions, 4, "no fourth child")
	assert.Len(t, treetest.OfType(tr.Events(root), event.JobStarted), 3)

	again, err := rx.StartChild(ctx, spec("call-1", 2))
	require.NoError(t, err, "a call that has its child re-attaches past the limit")
	assert.Equal(t, first.ID, again.ID)
	assert.True(t, again.Attached)
	d.Release()
	n.Idle()
}
