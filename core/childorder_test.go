package core_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A snapshot lists a session's children oldest first (docs/api.md), also
// when they were created in the same millisecond: a step's task calls
// start their children back to back, and a clock's millisecond holds
// several. Ordered by id within a tie, the tenth child ("root.10") came
// before the second ("root.2").
func TestSnapshotListsChildrenInCreationOrderWithinOneMillisecond(t *testing.T) {
	ctx := context.Background()
	const children = 11
	tr := treetest.New(t)
	d := treetest.NewDriver(4 * children) // the children, and the root's turns of their notices
	n := tr.Boot(d)
	root := n.NewSession("root")
	n.Admit(root, "hold")
	rx := <-d.Started
	var want []string
	for i := 1; i <= children; i++ { // the fake clock stands still: one millisecond
		c, err := rx.StartChild(ctx, core.ChildSpec{CallID: fmt.Sprintf("call-%d", i), Prompt: "hold", Background: true,
			MaxDepth: 1, MaxChildren: core.DefaultMaxSubagents})
		require.NoError(t, err)
		want = append(want, c.ID)
	}
	require.Equal(t, root+".10", want[9])
	snap, err := n.Inst.Snapshot(ctx, root, 0, 10)
	require.NoError(t, err)
	var got []string
	for _, c := range snap.Children {
		got = append(got, c.ID)
	}
	assert.Equal(t, want, got)
	d.Release()
	n.Idle()
}
