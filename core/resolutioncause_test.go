package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A reply commits the resolution and the claim, then starts the turn in
// another transaction. When that start never runs (a kill here; a full
// disk in simulator seed 154) and something that starts "whatever is
// next" comes first (an interrupt's sweep of the descendants under ended
// jobs, here and in the seed), the parked turn goes on with cause
// resolution, as the reply would have started it: no resume is counted
// because none happened, and the log says why the turn went on.
func TestResolvedTurnStartedByAnInterruptsSweepGoesOnAsAResolution(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(offlineTaskRunner(t, tr))
	n.NewSession("root")
	n.Admit("root", "/task --background hello")
	n.Idle() // the child's task turn, its notice and the root's turn for it
	own := n.Admit("root.1", "/ask which colour?")
	n.Idle()

	// The reply commits, taking the child's claim; its start never runs.
	replyAndDie(t, tr, n, "root.1")
	require.Equal(t, "running", tr.PromptState(own), "the parked turn, answered")

	host, _, kdb := tr.Host()
	second, err := core.Open(ctx, host, tr.Cfg, offlineTaskRunner(t, tr)) // no sweep
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); second.Abandon() })
	did, err := second.Interrupt(ctx, "root", event.ReasonUser)
	require.NoError(t, err)
	require.False(t, did, "the root is idle")
	require.NoError(t, second.WaitIdle(ctx))

	assert.Equal(t, "succeeded", tr.PromptState(own), "the child's own turn went on, not stopped: no parent waits for it")
	causes := startCauses(t, tr.Events("root.1"))
	assert.Equal(t, []string{event.CausePrompt, event.CausePrompt, event.CauseResolution}, causes,
		"the task turn's start, the own turn's start, its continuation after the answer")
}

// The same start owed by a reply, made by the next boot's sweep instead
// (recovery's Start of a claim with a running prompt and no execution):
// cause resolution, no resume counted, and the continuation runs once.
func TestResolvedTurnStartedByTheBootSweepGoesOnAsAResolution(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(offlineTaskRunner(t, tr))
	n.NewSession("root")
	pid := n.Admit("root", "/ask which colour?")
	n.Idle()
	replyAndDie(t, tr, n, "root")

	second := tr.Boot(offlineTaskRunner(t, tr))
	second.Idle()

	assert.Equal(t, "succeeded", tr.PromptState(pid))
	evs := tr.Events("root")
	assert.Empty(t, treetest.OfType(evs, event.ExecutionResumed), "nothing died mid-execution: no resume")
	causes := startCauses(t, evs)
	assert.Equal(t, []string{event.CausePrompt, event.CauseResolution}, causes, "the turn's start, its continuation after the answer")
}
