package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
)

// A permission request approved while its step waits on another request
// does not run yet; an interrupt then ends the turn. The approved call
// never ran, and the next turn's model is told so (NotRun), not that its
// outcome is unknown (NoResult), which would keep it from asking again
// for what was never done. Its sibling, cancelled, did not run either.
func TestApprovedCallCutBeforeItRanIsToldItDidNotRun(t *testing.T) {
	c := newPermRun(t, false)
	n, pid, asked := c.parked(t, "deploy a b", 2)
	_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyOnce, ""))
	require.NoError(t, err)
	did, err := n.Inst.Interrupt(ctx, c.sid, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	require.Equal(t, "interrupted", c.tr.PromptState(pid))

	c.admit(t, n, "p2", "deploy c")
	n.Idle()
	assert.Equal(t, []string{runner.NotRun, core.PermissionCancelledOutput}, c.m.toolResults(),
		"the approved call did not run, nor its cancelled sibling")
	assert.Zero(t, c.l.count("deploy"))
}
