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

// StartChild judges its spec itself, whatever checked it before (a Go
// program driving core has no task tool in front): a blank prompt, or a
// child past the depth limit, is ErrInvalid and writes nothing, and the
// parent's turn goes on.
func TestStartChildRefusesABlankPromptAndTheDepthLimit(t *testing.T) {
	ctx := context.Background()
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	root := n.NewSession("root")
	pid := n.Admit(root, "hold")
	rx := <-d.Started
	for name, spec := range map[string]core.ChildSpec{
		"a blank prompt":        {CallID: "call-1", Prompt: " \n\t", MaxDepth: 3},
		"a depth limit of none": {CallID: "call-2", Prompt: "work", MaxDepth: 0},
	} {
		_, err := rx.StartChild(ctx, spec)
		assert.ErrorIs(t, err, core.ErrInvalid, name)
	}
	sessions, err := n.Inst.Sessions(ctx)
	require.NoError(t, err)
	assert.Len(t, sessions, 1, "no child was created")
	assert.Empty(t, treetest.OfType(tr.Events(root), event.JobStarted))

	child, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-3", Prompt: "work", MaxDepth: 1})
	require.NoError(t, err, "a child at the limit is allowed")
	assert.Equal(t, root+".1", child.ID)
	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
}
