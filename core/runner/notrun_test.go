package runner_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/runner"
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
	c := interruptChargeAndNote(t, runner.NewConfig())
	require.Equal(t, "interrupted", c.tr.PromptState(c.pid))

	req := c.run("what happened?")
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
	assert.Zero(t, c.notes.count("note"))
}

// delegateModel asks for one task, whose child's request stalls until
// cancelled (announced on childAsked), and answers in text once the task
// call has a result. It keeps the root's last request.
type delegateModel struct {
	mu         sync.Mutex
	childAsked chan struct{}
	lastRoot   model.Request
}

func (m *delegateModel) Name() string { return "delegate-script" }

func (m *delegateModel) Stream(_ context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(req.Messages) > 0 && req.Messages[0].Text == "child work" {
		select {
		case m.childAsked <- struct{}{}:
		default:
		}
		return &scriptStream{s: scriptStep{stall: true}}, nil
	}
	m.lastRoot = req
	if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleUser && last.Text == "delegate" {
		return &scriptStream{s: scriptStep{chunks: toolCall("task", `{"prompt":"child work"}`)}}, nil
	}
	return &scriptStream{s: scriptStep{chunks: text("done")}}, nil
}

// A task call that a person approved and that then waited for its
// sub-agent may have had work done by the time an interrupt ended its
// turn: the model is told it has no result, not that it did not run,
// though it waited on a permission request first.
func TestApprovedTaskCutByAnInterruptIsNotToldItDidNotRun(t *testing.T) {
	tr := treetest.New(t)
	m := &delegateModel{childAsked: make(chan struct{}, 1)}
	cfg := runner.NewConfig().WithPermissions([]permission.Rule{{Action: "task", Resource: "*", Decision: permission.Ask}})
	n := tr.Boot(taskRunner(t, tr, m, cfg))
	sid := n.NewSession("root")
	pid := n.Admit(sid, "delegate")
	n.Idle()
	asked := permissions(t, n, sid)
	require.Len(t, asked, 1, "the task call asks first")
	_, err := n.Inst.Reply(ctx, sid, asked[0].ID, permReply("r1", core.ReplyOnce, ""))
	require.NoError(t, err)
	<-m.childAsked // the sub-agent is at work

	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	require.Equal(t, "interrupted", tr.PromptState(pid))

	n.Admit(sid, "what happened?")
	n.Idle()
	m.mu.Lock()
	req := m.lastRoot
	m.mu.Unlock()
	assert.Equal(t, []string{runner.NoResult}, toolTexts(req))
}
