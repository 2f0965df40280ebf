package runner_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A step that waits on blockers (questions, permission requests) ends
// without a continuation when a reply or an interrupt ends its turn, so
// its waiting calls never get a result. The next turn's model is told
// what the person said: a question's answers, or how it was cancelled
// and the message sent with the cancel; a rejected call's message; that an
// approved call did not run. Before, it read only that those calls had no
// result (or that a request was cancelled that had been approved), and
// the user's words were lost.

// cancelRun is one tree whose first step asks the calls of first (each a
// question of one choice, or "deploy", which asks permission) and then
// answers in text.
type cancelRun struct {
	tr *treetest.Tree
	m  *scriptModel
	n  *treetest.Node
}

func newCancelRun(t *testing.T, first ...string) *cancelRun {
	c := &cancelRun{tr: treetest.New(t)}
	c.m = &scriptModel{steps: func(k int) scriptStep {
		if k > 1 {
			return scriptStep{chunks: text("ok")}
		}
		var chunks []model.Chunk
		for i, name := range first {
			call := &model.ToolCallDelta{Index: i, ID: "call_" + name, Name: tool.QuestionName,
				Arguments: `{"questions":[{"question":"Which colour for ` + name + `?","choices":["red","green"]}]}`}
			if name == "deploy" {
				call.Name, call.Arguments = "deploy", `{"target":"prod"}`
			}
			chunks = append(chunks, model.Chunk{ToolCall: call})
		}
		return scriptStep{chunks: append(chunks, model.Chunk{Finish: model.FinishToolCalls})}
	}}
	d := &deployTool{l: newLedger()}
	c.n = c.tr.Boot(newRunner(t, c.m, runner.NewConfig(), d, tool.QuestionTool()))
	c.n.NewSession("s")
	c.n.Admit("s", "ask")
	c.n.Idle()
	return c
}

// blocker is the pending blocker of the call named name: the question
// that names it, or the permission request.
func (c *cancelRun) blocker(t *testing.T, kind, name string) core.Blocker {
	t.Helper()
	bs, err := c.n.Inst.Blockers(ctx, "s", kind)
	require.NoError(t, err)
	for _, b := range bs {
		if kind == event.KindPermission || strings.Contains(string(b.Request), "for "+name+"?") {
			return b
		}
	}
	require.FailNow(t, "no pending blocker", "%s for %s", kind, name)
	return core.Blocker{}
}

// nextTurnSees runs a second turn and returns the tool results its model
// request carried, in the first step's call order.
func (c *cancelRun) nextTurnSees(t *testing.T) []string {
	t.Helper()
	c.n.Admit("s", "what happened?")
	c.n.Idle()
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return toolTexts(c.m.lastReq)
}

func TestBlockedCallsOfAnEndedTurnAreToldHowTheyEnded(t *testing.T) {
	t.Run("cancel with a message, and its sibling", func(t *testing.T) {
		c := newCancelRun(t, "a", "b")
		a := c.blocker(t, event.KindQuestion, "a")
		c.blocker(t, event.KindQuestion, "b")
		_, err := c.n.Inst.Reply(ctx, "s", a.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true,
			Message: "Never mind, I will pick one myself."})
		require.NoError(t, err)
		c.n.Idle()

		assert.Equal(t, []string{
			"The user cancelled this question instead of answering it, which ended the turn.\n" +
				"The user added: Never mind, I will pick one myself.",
			"This question was not answered: the user's reply to another request of the same step ended the turn.",
		}, c.nextTurnSees(t))
	})
	t.Run("cancel without a message", func(t *testing.T) {
		c := newCancelRun(t, "a")
		a := c.blocker(t, event.KindQuestion, "a")
		_, err := c.n.Inst.Reply(ctx, "s", a.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true})
		require.NoError(t, err)
		c.n.Idle()

		assert.Equal(t, []string{
			"The user cancelled this question instead of answering it, which ended the turn.",
		}, c.nextTurnSees(t))
	})
	t.Run("a permission's plain reject", func(t *testing.T) {
		c := newCancelRun(t, "deploy", "a")
		c.blocker(t, event.KindQuestion, "a")
		d := c.blocker(t, event.KindPermission, "deploy")
		_, err := c.n.Inst.Reply(ctx, "s", d.ID, permReply("r1", core.ReplyReject, ""))
		require.NoError(t, err)
		c.n.Idle()

		assert.Equal(t, []string{
			core.DeclinedByUser,
			"This question was not answered: the user's reply to another request of the same step ended the turn.",
		}, c.nextTurnSees(t))
	})
	t.Run("an interrupt", func(t *testing.T) {
		c := newCancelRun(t, "a")
		c.blocker(t, event.KindQuestion, "a")
		did, err := c.n.Inst.Interrupt(ctx, "s", event.ReasonUser)
		require.NoError(t, err)
		require.True(t, did)
		c.n.Idle()

		assert.Equal(t, []string{
			"This question was not answered: its turn ended (interrupted or replaced) while it waited for the user.",
		}, c.nextTurnSees(t))
	})
	t.Run("answered, then a permission's plain reject", func(t *testing.T) {
		c := newCancelRun(t, "a", "deploy")
		a := c.blocker(t, event.KindQuestion, "a")
		d := c.blocker(t, event.KindPermission, "deploy")
		_, err := c.n.Inst.Reply(ctx, "s", a.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}},
			Message: "A bright one."})
		require.NoError(t, err)
		_, err = c.n.Inst.Reply(ctx, "s", d.ID, permReply("r2", core.ReplyReject, ""))
		require.NoError(t, err)
		c.n.Idle()

		assert.Equal(t, []string{
			"The user answered:\n\"Which colour for a?\" → \"green\"\nThe user added: A bright one.",
			core.DeclinedByUser,
		}, c.nextTurnSees(t))
	})
	t.Run("answered, then an interrupt", func(t *testing.T) {
		c := newCancelRun(t, "a", "b")
		b := c.blocker(t, event.KindQuestion, "b")
		_, err := c.n.Inst.Reply(ctx, "s", b.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"red"}}})
		require.NoError(t, err)
		did, err := c.n.Inst.Interrupt(ctx, "s", event.ReasonUser)
		require.NoError(t, err)
		require.True(t, did)
		c.n.Idle()

		assert.Equal(t, []string{
			"This question was not answered: its turn ended (interrupted or replaced) while it waited for the user.",
			"The user answered:\n\"Which colour for b?\" → \"red\"",
		}, c.nextTurnSees(t))
	})
	t.Run("approved, then a question's cancel", func(t *testing.T) {
		c := newCancelRun(t, "deploy", "a")
		a := c.blocker(t, event.KindQuestion, "a")
		d := c.blocker(t, event.KindPermission, "deploy")
		_, err := c.n.Inst.Reply(ctx, "s", d.ID, permReply("r1", core.ReplyOnce, ""))
		require.NoError(t, err)
		_, err = c.n.Inst.Reply(ctx, "s", a.ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r2", Cancel: true})
		require.NoError(t, err)
		c.n.Idle()

		assert.Equal(t, []string{
			runner.NotRun,
			"The user cancelled this question instead of answering it, which ended the turn.",
		}, c.nextTurnSees(t))
	})
	t.Run("rejected with a message, then an interrupt", func(t *testing.T) {
		c := newCancelRun(t, "deploy", "a")
		c.blocker(t, event.KindQuestion, "a")
		d := c.blocker(t, event.KindPermission, "deploy")
		_, err := c.n.Inst.Reply(ctx, "s", d.ID, permReply("r1", core.ReplyReject, "Not on a Friday."))
		require.NoError(t, err)
		did, err := c.n.Inst.Interrupt(ctx, "s", event.ReasonUser)
		require.NoError(t, err)
		require.True(t, did)
		c.n.Idle()

		assert.Equal(t, []string{
			core.DeclinedByUser + " The user said: Not on a Friday.",
			"This question was not answered: its turn ended (interrupted or replaced) while it waited for the user.",
		}, c.nextTurnSees(t))
	})
}
