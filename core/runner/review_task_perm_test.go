package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Review: a foreground task call that an operator rule makes ask, once
// approved, must still wait for its child and settle with the child's
// answer (DESIGN §10), not be run as a background body.
func TestReviewApprovedForegroundTaskWaitsForChild(t *testing.T) {
	tr := treetest.New(t)
	m := &countingModel{inner: offline.New(nil, offline.Options{}), tr: tr}
	cfg := runner.NewConfig().WithPermissions([]permission.Rule{{Action: "task", Resource: "*", Decision: permission.Ask}})
	n := tr.Boot(taskRunner(t, tr, m, cfg))
	sid := n.NewSession("root")
	pid := n.Admit(sid, fgPrompt)
	n.Idle()

	bs := permissions(t, n, sid)
	require.Len(t, bs, 1, "the task call asks first")
	_, err := n.Inst.Reply(ctx, sid, bs[0].ID, permReply("r1", "once", ""))
	require.NoError(t, err)
	n.Idle()

	assert.Equal(t, "succeeded", tr.PromptState(pid))
	sets := settlements(t, tr.Events(sid))
	require.Len(t, sets, 1)
	assert.Equal(t, event.OutcomeOK, sets[0].Outcome)
	assert.Equal(t, "You said: hello child", sets[0].Output, "the parent's call settles with the child's answer")
}
