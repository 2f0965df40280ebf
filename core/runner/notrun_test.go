package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A plain reject ends the turn and cancels the step's other permission
// request. That sibling call never ran, and the next turn's model is told
// so, not that its result is unknown.
func TestSiblingOfAPlainRejectIsToldItDidNotRun(t *testing.T) {
	c := newPermRun(t, false)
	n, pid, asked := c.parked(t, "deploy a b", 2)
	_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyReject, ""))
	require.NoError(t, err)
	n.Idle()
	require.Equal(t, "interrupted", c.tr.PromptState(pid))

	c.admit(t, n, "p2", "deploy c")
	n.Idle()
	assert.Equal(t, []string{core.DeclinedByUser, core.PermissionCancelledOutput}, c.m.toolResults(),
		"the rejected call is declined, its cancelled sibling did not run")
	assert.Zero(t, c.l.count("deploy"))
}

// An interrupt while a step's first call executes ends the turn before the
// second call started: the next turn's model is told the first has no
// result (its body may have run) and the second did not run.
func TestCallsCutByAnInterruptAreToldApart(t *testing.T) {
	tr := treetest.New(t)
	bodies := newBodyLog()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	charge := tool.Func{DefaultPermission: "allow", Name: "charge", Run: func(ctx context.Context, c tool.Call) (string, error) {
		bodies.enter(c)
		<-release // ignores cancellation: the interrupt commits without it
		return "charged", nil
	}}
	l := newLedger()
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "a", Name: "charge", Arguments: `{}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "b", Name: "note", Arguments: `{}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("done")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), charge, l.tool("note", true)))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "pay and note")
	<-bodies.entered

	interruptPastGrace(t, tr, n, sid)
	require.Equal(t, "interrupted", tr.PromptState(pid))

	n.Admit(sid, "what happened?")
	n.Idle()
	m.mu.Lock()
	req := m.lastReq
	m.mu.Unlock()
	results := map[string]string{}
	var calls []model.ToolCall
	for _, msg := range req.Messages {
		calls = append(calls, msg.ToolCalls...)
		if msg.Role == model.RoleTool {
			results[msg.Name] = msg.Text
		}
	}
	require.Len(t, calls, 2)
	assert.Equal(t, runner.NoResult, results["charge"], "the executing call may have run")
	assert.Equal(t, runner.NotRun, results["note"], "the call after it never started")
	assert.Zero(t, l.count("note"))
}
