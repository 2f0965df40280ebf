package core_test

import (
	"context"
	"encoding/json"
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
	tr, n, d, root, rx := rootTurnHeld(t, nil)
	pid := rx.PromptID()
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

	child, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-3", Prompt: "work", MaxDepth: 1, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err, "a child at the limit is allowed")
	assert.Equal(t, root+".1", child.ID)
	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
}

// StartChild refuses a child past the tree's sub-agent limit, counting the
// children of every depth, as ErrInvalid that names the limit, writing
// nothing; a call that has its child already re-attaches to it at the
// limit, and the refusal holds for any later call.
func TestStartChildRefusesAChildPastTheTreesLimit(t *testing.T) {
	ctx := context.Background()
	tr, n, d, root, rx := rootTurnHeld(t, nil)
	spec := func(callID string) core.ChildSpec { return limitSpec(callID, 2) }
	first, err := rx.StartChild(ctx, spec("call-1"))
	require.NoError(t, err)
	cx := <-d.Started // the child's turn: its own child is the tree's second
	second, err := cx.StartChild(ctx, spec("call-1"))
	require.NoError(t, err)
	assert.Equal(t, root+".2", second.ID)
	<-d.Started

	for _, x := range []*core.Execution{rx, cx} {
		_, err = x.StartChild(ctx, spec("call-2"))
		require.ErrorIs(t, err, core.ErrInvalid)
		assert.Contains(t, err.Error(), "this session tree already has 2 sub-agents, the most it may hold (max_subagents 2)")
	}
	sessions, err := n.Inst.Sessions(ctx)
	require.NoError(t, err)
	ids := []string{}
	for _, s := range sessions {
		ids = append(ids, s.ID)
	}
	assert.Equal(t, []string{root, root + ".1", root + ".2"}, ids, "no third child")
	assert.Len(t, treetest.OfType(tr.Events(root), event.JobStarted), 1)

	again, err := rx.StartChild(ctx, spec("call-1"))
	require.NoError(t, err, "a call that has its child re-attaches at the limit")
	assert.Equal(t, first.ID, again.ID)
	assert.True(t, again.Attached)
	d.Release()
	n.Idle()
}

// A tree that holds more children than its limit allows (an operator
// lowered max_subagents while the tree ran, or a host booted it with a
// smaller one) takes no more: the limit is a ceiling, not a count to
// reach exactly, and the refusal names the tree's children and the limit
// as they are. A call that has its child already still re-attaches.
func TestStartChildRefusesATreePastALoweredLimit(t *testing.T) {
	ctx := context.Background()
	tr, n, d, root, rx := rootTurnHeld(t, nil)
	spec := limitSpec
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

// rootTurnHeld boots a tree for the sub-agent tests: its root session
// "root", of session config config (nil: none), runs a turn the driver
// holds, rx.
func rootTurnHeld(t *testing.T, config json.RawMessage) (*treetest.Tree, *treetest.Node, *treetest.Driver, string, *core.Execution) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	s, err := n.Inst.CreateSession(context.Background(), core.NewSession{ID: "root", Principal: "tester", Config: config})
	require.NoError(t, err)
	n.Admit(s.ID, "hold")
	return tr, n, d, s.ID, <-d.Started
}

// limitSpec is a task call's child spec under a sub-agent limit of limit.
func limitSpec(callID string, limit int) core.ChildSpec {
	return core.ChildSpec{CallID: callID, Prompt: "hold", MaxDepth: 3, MaxChildren: limit}
}
