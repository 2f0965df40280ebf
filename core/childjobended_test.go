package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A reply hands a child parked on its question the claim in one
// transaction and starts the child's turn in another. A parent's interrupt
// that commits in between (the start waiting out storage, the claim lock
// let go) ends the child's job; its interruptChildren finds nothing
// running yet. The start then ends the child's task turn, interrupted as
// its parent was, and asks the model nothing for it. Here the two
// commits are made by two instances, each killed right after its commit,
// and a third starts the child as the reply's caller would (seed 23 of
// the simulator found the interleaving with storage waits).
func TestChildStartAfterItsJobEndedEndsItsTurn(t *testing.T) {
	tr := treetest.New(t)
	newRunner := func() *runner.Runner { return offlineTaskRunner(t, tr) }
	n := tr.Boot(newRunner())
	n.NewSession("root")
	pid := n.Admit("root", "/task /ask which colour?")
	n.Idle()

	// The reply commits, taking the child's claim; its start never runs.
	replyAndDie(t, tr, n, "root.1")

	// The parent's interrupt commits, ending the job; its instance dies
	// before interruptChildren.
	host, _, kdb := tr.Host()
	second, err := core.Open(ctx, host, tr.Cfg, newRunner()) // no sweep
	require.NoError(t, err)
	kdb.KillAt(1, true)
	_, _ = second.Interrupt(ctx, "root", event.ReasonUser)
	<-kdb.Died()
	second.Abandon()
	require.Equal(t, "interrupted", tr.PromptState(pid), "the parent's turn")
	require.True(t, tr.Claim("root.1").Exists, "the child still holds the reply's claim")
	task := taskPromptID(t, tr, "root.1")
	require.Equal(t, "running", tr.PromptState(task), "the child's task turn, parked and answered")

	host, _, kdb = tr.Host()
	third, err := core.Open(ctx, host, tr.Cfg, newRunner()) // no sweep
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); third.Abandon() })
	third.StartForTest(ctx, "root.1", event.CauseResolution)
	require.NoError(t, third.WaitIdle(ctx))

	evs := tr.Events("root.1")
	for _, e := range treetest.OfType(evs, event.ExecutionStarted) {
		var s event.Started
		require.NoError(t, e.Decode(&s))
		assert.NotEqual(t, event.CauseResolution, s.Cause, "the child's turn went on after its job ended: %+v", s)
	}
	assert.Len(t, treetest.OfType(evs, event.StepStarted), 1, "no model step after the question's")
	requireTaskTurnInterruptedByUser(t, tr, "root.1")
	assert.Equal(t, "interrupted", tr.PromptState(task))
	assert.False(t, tr.Claim("root.1").Exists)
}
