package core_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// childAndAskDriver parks a root's turn, in one step, on a foreground task
// call whose child it starts first and on one more blocker: a question
// ("q") or a permission request ("p"), as the root's prompt says. Every
// other run is treetest.Driver's: the child's task prompt "hold" holds
// until it is cancelled.
type childAndAskDriver struct{ *treetest.Driver }

func (d childAndAskDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	if x.SessionID() != "root" || x.Cause() != event.CausePrompt {
		return d.Driver.Run(ctx, x)
	}
	step, taskCall, askCall := x.ID()+".step", x.ID()+".call0", x.ID()+".call1"
	// The step and its calls, as the runner records them before running
	// any: they tie the child's job to the parent's turn.
	askTool := tool.QuestionName
	if x.Prompt() == "p" {
		askTool = "deploy"
	}
	if _, err := x.Append(ctx, true,
		core.NewEvent{Type: event.StepStarted, Payload: event.StepBegun{StepID: step, ExecutionID: x.ID(), PromptID: x.PromptID(), Index: 1}},
		core.NewEvent{Type: event.StepCompleted, Payload: event.StepDone{StepID: step, Finish: "tool_calls", ToolCalls: []event.ToolCall{
			{CallID: taskCall, Index: 0, Name: "task", Arguments: `{"prompt":"hold"}`},
			{CallID: askCall, Index: 1, Name: askTool, Arguments: `{}`}}}}); err != nil {
		return core.Outcome{Kind: core.Stopped}
	}
	child, err := x.StartChild(ctx, core.ChildSpec{CallID: taskCall, Prompt: "hold", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	if err != nil {
		return core.Outcome{Kind: core.Failed, FailType: event.FailDriver, Message: err.Error()}
	}
	task, err := core.TaskBlocker(taskCall, 0, child)
	if err != nil {
		return core.Outcome{Kind: core.Failed, FailType: event.FailDriver, Message: err.Error()}
	}
	ask := event.Blocker{ID: core.BlockerID("q", askCall, 0), Kind: event.KindQuestion, CallID: askCall, Adapter: tool.QuestionAdapter,
		Request: json.RawMessage(`{"questions":[{"question":"which colour?","choices":["red","green"]}]}`)}
	if x.Prompt() == "p" {
		ask = event.Blocker{ID: core.BlockerID("p", askCall, 0), Kind: event.KindPermission, CallID: askCall, Adapter: core.PermissionAdapter,
			Request: json.RawMessage(`{"action":"deploy","resources":["tool:deploy"],"arguments":{}}`)}
	}
	return core.Outcome{Kind: core.Parked, Park: &event.Parked{StepID: step, ExecutionID: x.ID(), PromptID: x.PromptID(),
		Blockers: []event.Blocker{task, ask}}}
}

// A reply that ends the turn (a cancelled question, a plain reject) stops
// the turn's running foreground children before it answers, as an
// interrupt does (DESIGN §9, §10): the step parks on a task call whose
// child holds in its turn and on a question or a permission request, and
// once Reply returns the child runs no more and its task turn is recorded
// interrupted{user}. Checked right after the reply, with no wait: nothing
// else stops the child before the next wake-up's sweep, and the fake
// clock never brings one.
func TestReplyEndingTheTurnStopsItsRunningChildren(t *testing.T) {
	for name, c := range map[string]struct {
		prompt string // childAndAskDriver's: the step's other blocker
		reply  core.Reply
	}{
		"a cancelled question": {"q", core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true}},
		"a plain reject":       {"p", core.Reply{Kind: event.KindPermission, ResponseID: "r1", Decision: core.ReplyReject}},
	} {
		t.Run(name, func(t *testing.T) {
			tr := treetest.New(t)
			d := childAndAskDriver{treetest.NewDriver(4)}
			n := tr.Boot(d)
			n.NewSession("root")
			sub := n.Inst.Subscribe("root", 1024)
			defer sub.Close()
			pid := n.Admit("root", c.prompt)
			cx := within(t, d.Started, "the child's turn to start")
			require.Equal(t, "root.1", cx.SessionID())
			waitFor(t, sub, event.StepParked)
			require.True(t, n.Inst.RunningHere("root.1"), "the child runs")
			bs, err := n.Inst.Blockers(ctx, "root", c.reply.Kind)
			require.NoError(t, err)
			require.Len(t, bs, 1)

			_, err = n.Inst.Reply(ctx, "root", bs[0].ID, c.reply)
			require.NoError(t, err)
			require.False(t, n.Inst.RunningHere("root.1"), "the child is stopped before the reply answers")
			requireTaskTurnInterruptedByUser(t, tr, "root.1")

			n.Idle()
			assert.Equal(t, "interrupted", tr.PromptState(pid))
			assert.Len(t, treetest.OfType(tr.Events("root"), event.TaskCancelled), 1, "the task blocker is cancelled with the turn")
			for _, sid := range []string{"root", "root.1"} {
				assert.False(t, tr.Claim(sid).Exists, sid)
			}
		})
	}
}
