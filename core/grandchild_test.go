package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Interrupting a root whose parked child waits on a grandchild still at
// work stops the grandchild too, before the interrupt answers: the root's
// transaction ends the child's task turn and both jobs, and the
// grandchild's running task turn is stopped after that commit, as a
// child's is (a campaign through the public API found it running on,
// calling tools and the model after the 200).
func TestInterruptStopsAGrandchildUnderAParkedChild(t *testing.T) {
	tr := treetest.New(t)
	r := offlineTaskRunner(t, tr)
	n := tr.Boot(r)
	n.NewSession("root")
	pid := n.Admit("root", "/task /task /sleep 1h")
	tr.Clock.BlockUntil(3) // the grandchild sleeps in its step: wall, idle and sleep timers
	require.True(t, n.Inst.RunningHere("root.2"), "the grandchild runs")
	require.False(t, n.Inst.RunningHere("root.1"), "the child is parked on its task call")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only to fail instead of hanging
	defer cancel()
	did, err := n.Inst.Interrupt(ctx, "root", event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	assert.False(t, n.Inst.RunningHere("root.2"), "the grandchild is stopped before the interrupt answers")
	terms := treetest.Terminals(tr.Events("root.2"))
	require.Len(t, terms, 1, "the grandchild's task turn ended")
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
	assert.Equal(t, event.ReasonUser, in.Reason, "interrupted as its ancestor was")
	n.Idle()
	assert.False(t, tr.Claim("root.2").Exists, "no claim is left on the grandchild")
}
