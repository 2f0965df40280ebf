package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/tool"
)

// A call's several blockers are listed in the order the step asked them
// (by ordinal), in the tree's list and in the session's snapshot alike,
// as docs/api.md promises ("oldest first"): a client shows them in that
// order, and a person answers the first question first.
func TestSeveralBlockersOfOneCallListedInOrdinalOrder(t *testing.T) {
	_, n, _, bs := askOnce(t, twoAsks{tool.QuestionTool().(tool.Blocking)}, `{}`)
	require.Len(t, bs, 2)
	assert.Equal(t, []int{0, 1}, []int{bs[0].Ordinal, bs[1].Ordinal}, "the tree's list")
	snap, err := n.Inst.Snapshot(ctx, "s", 0, 10)
	require.NoError(t, err)
	require.Len(t, snap.Blockers, 2)
	assert.Equal(t, []int{0, 1}, []int{snap.Blockers[0].Ordinal, snap.Blockers[1].Ordinal}, "the snapshot's list")
}
