package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A prompt a client sent a parked child (queued, unclaimed, behind the
// task turn waiting on its question) is the child's own: the parent's
// interrupt, which ends that task turn, takes the claim the child did not
// hold for it in the same commit (claimForQueue), so a kill right after
// that commit leaves it to the next boot's sweep, which runs it. Without
// the claim it would stay queued for good: admitted, never run.
func TestParentInterruptOfAParkedChildClaimsItsOwnQueuedPrompt(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(offlineTaskRunner(t, tr))
	n.NewSession("root")
	task := n.Admit("root", "/task /ask which colour?")
	n.Idle()
	require.False(t, tr.Claim("root.1").Exists, "the child is parked on its question")
	own := n.Admit("root.1", "mine")
	require.Equal(t, "queued", tr.PromptState(own), "queued behind the parked task turn")

	n.Kill.KillAt(1, true) // dies with the interrupt's commit
	_, _ = n.Inst.Interrupt(ctx, "root", event.ReasonUser)
	<-n.Kill.Died()
	n.Crash()
	require.Equal(t, "interrupted", tr.PromptState(task), "the interrupt's commit ended the child's task turn")
	require.Equal(t, "queued", tr.PromptState(own))
	require.True(t, tr.Claim("root.1").Exists, "the child's own prompt holds the claim")

	tr.Boot(offlineTaskRunner(t, tr)).Idle()
	assert.Equal(t, "succeeded", tr.PromptState(own), "the sweep ran the child's own prompt")
}
