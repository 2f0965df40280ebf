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

// StartChild counts the depth of the session asking, through all its
// ancestors, not only whether it has a parent: under a limit of 2 a child
// (depth 1) may start a grandchild, the grandchild (depth 2) may not, and
// under a limit of 1 the child may not either. A refusal is ErrInvalid,
// names the depth, and writes nothing. The runner passes its task depth
// (runner.WithTaskDepth) in every ChildSpec; core enforces it.
func TestStartChildCountsEveryAncestorAgainstTheDepthLimit(t *testing.T) {
	ctx := context.Background()
	tr, n, d, root, rx := rootTurnHeld(t, nil)
	spec := func(callID string, maxDepth int) core.ChildSpec {
		return core.ChildSpec{CallID: callID, Prompt: "hold", MaxDepth: maxDepth, MaxChildren: core.DefaultMaxSubagents}
	}
	child, err := rx.StartChild(ctx, spec("call-1", 2))
	require.NoError(t, err)
	cx := within(t, d.Started, "the child's turn to start")
	require.Equal(t, child.ID, cx.SessionID())

	_, err = cx.StartChild(ctx, spec("call-1", 1))
	require.ErrorIs(t, err, core.ErrInvalid, "a child under a limit of 1")
	assert.Contains(t, err.Error(), "sub-agents may nest 1 deep, and this session is at depth 1 already")
	assert.Empty(t, treetest.OfType(tr.Events(child.ID), event.JobStarted), "nothing written")

	grandchild, err := cx.StartChild(ctx, spec("call-2", 2))
	require.NoError(t, err, "a grandchild at the limit of 2")
	gx := within(t, d.Started, "the grandchild's turn to start")
	require.Equal(t, grandchild.ID, gx.SessionID())

	_, err = gx.StartChild(ctx, spec("call-1", 2))
	require.ErrorIs(t, err, core.ErrInvalid, "a great-grandchild under a limit of 2")
	assert.Contains(t, err.Error(), "sub-agents may nest 2 deep, and this session is at depth 2 already")
	assert.Empty(t, treetest.OfType(tr.Events(grandchild.ID), event.JobStarted), "nothing written")

	sessions, err := n.Inst.Sessions(ctx)
	require.NoError(t, err)
	ids := []string{}
	for _, s := range sessions {
		ids = append(ids, s.ID)
	}
	assert.Equal(t, []string{root, child.ID, grandchild.ID}, ids)
	d.Release()
	n.Idle()
}
