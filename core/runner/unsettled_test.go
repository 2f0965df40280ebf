package runner_test

import (
	"context"
	"strings"
	"sync/atomic"
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
// question naming the call, or "deploy", which asks permission) and then
// answers in text.
type cancelRun struct {
	tr   *treetest.Tree
	m    *scriptModel
	n    *treetest.Node
	gate *gatedDriver
}

// gatedDriver is the runner behind a gate: while held, an execution the
// instance starts (the continuation a reply claims) is announced on
// started and does nothing until it is cancelled, so an interrupt lands
// between a reply's commit and its continuation's first write.
type gatedDriver struct {
	inner   core.Driver
	held    atomic.Bool
	started chan struct{}
}

func (g *gatedDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	if !g.held.Load() {
		return g.inner.Run(ctx, x)
	}
	g.started <- struct{}{}
	<-ctx.Done()
	return core.Outcome{Kind: core.Stopped}
}

func newCancelRun(t *testing.T, first ...string) *cancelRun {
	return newCancelRunOf(t, runner.NewConfig(), first...)
}

// newCancelRunOf is newCancelRun with a runner of cfg.
func newCancelRunOf(t *testing.T, cfg runner.Config, first ...string) *cancelRun {
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
	c.gate = &gatedDriver{inner: newRunner(t, c.m, cfg, d, tool.QuestionTool()), started: make(chan struct{}, 1)}
	c.n = c.tr.Boot(c.gate)
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

// reply replies r to the pending blocker of kind of the call named name.
func (c *cancelRun) reply(t *testing.T, kind, name string, r core.Reply) {
	t.Helper()
	r.Kind = kind
	_, err := c.n.Inst.Reply(ctx, "s", c.blocker(t, kind, name).ID, r)
	require.NoError(t, err)
}

// interruptBeforeContinuing makes the reply r (the last one its step
// waits on) claim a continuation that does not run, interrupts the turn
// while it holds the claim, and opens the gate again.
func (c *cancelRun) interruptBeforeContinuing(t *testing.T, kind, name string, r core.Reply) {
	t.Helper()
	c.gate.held.Store(true)
	c.reply(t, kind, name, r)
	<-c.gate.started
	c.interrupt(t)
	c.n.Idle()
	c.gate.held.Store(false)
	require.Empty(t, treetest.OfType(c.tr.Events("s"), event.ToolSettled), "the continuation wrote before the interrupt")
}

func (c *cancelRun) interrupt(t *testing.T) {
	t.Helper()
	did, err := c.n.Inst.Interrupt(ctx, "s", event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
}

// What the next turn's model reads about a question of an ended turn.
const (
	cancelledByUser  = "The user cancelled this question instead of answering it, which ended the turn."
	endedBySibling   = "This question was not answered: the user's reply to another request of the same step ended the turn."
	endedByInterrupt = "This question was not answered: its turn ended (interrupted or replaced) while it waited for the user."
)

func TestBlockedCallsOfAnEndedTurnAreToldHowTheyEnded(t *testing.T) {
	question, permission := event.KindQuestion, event.KindPermission
	cases := []struct {
		name  string
		calls []string // the first step's calls
		end   func(t *testing.T, c *cancelRun)
		want  []string // the tool results the next turn's model reads, in call order
	}{
		{"a cancel with a message, and its sibling", []string{"a", "b"}, func(t *testing.T, c *cancelRun) {
			c.reply(t, question, "a", core.Reply{ResponseID: "r1", Cancel: true, Message: "Never mind, I will pick one myself."})
		}, []string{cancelledByUser + "\nThe user added: Never mind, I will pick one myself.", endedBySibling}},
		{"a cancel without a message", []string{"a"}, func(t *testing.T, c *cancelRun) {
			c.reply(t, question, "a", core.Reply{ResponseID: "r1", Cancel: true})
		}, []string{cancelledByUser}},
		{"a permission's plain reject", []string{"deploy", "a"}, func(t *testing.T, c *cancelRun) {
			c.reply(t, permission, "deploy", permReply("r1", core.ReplyReject, ""))
		}, []string{core.DeclinedByUser, endedBySibling}},
		{"an interrupt", []string{"a"}, func(t *testing.T, c *cancelRun) {
			c.interrupt(t)
		}, []string{endedByInterrupt}},
		{"answered, then a permission's plain reject", []string{"a", "deploy"}, func(t *testing.T, c *cancelRun) {
			c.reply(t, question, "a", core.Reply{ResponseID: "r1", Answers: [][]string{{"green"}}, Message: "A bright one."})
			c.reply(t, permission, "deploy", permReply("r2", core.ReplyReject, ""))
		}, []string{"The user answered:\n\"Which colour for a?\" → \"green\"\nThe user added: A bright one.", core.DeclinedByUser}},
		{"answered, then an interrupt", []string{"a", "b"}, func(t *testing.T, c *cancelRun) {
			c.reply(t, question, "b", core.Reply{ResponseID: "r1", Answers: [][]string{{"red"}}})
			c.interrupt(t)
		}, []string{endedByInterrupt, "The user answered:\n\"Which colour for b?\" → \"red\""}},
		{"approved, then a question's cancel", []string{"deploy", "a"}, func(t *testing.T, c *cancelRun) {
			c.reply(t, permission, "deploy", permReply("r1", core.ReplyOnce, ""))
			c.reply(t, question, "a", core.Reply{ResponseID: "r2", Cancel: true})
		}, []string{runner.NotRun, cancelledByUser}},
		{"rejected with a message, then an interrupt", []string{"deploy", "a"}, func(t *testing.T, c *cancelRun) {
			c.reply(t, permission, "deploy", permReply("r1", core.ReplyReject, "Not on a Friday."))
			c.interrupt(t)
		}, []string{core.DeclinedByUser + " The user said: Not on a Friday.", endedByInterrupt}},
		{"answered, then an interrupt before the continuation wrote", []string{"a"}, func(t *testing.T, c *cancelRun) {
			c.interruptBeforeContinuing(t, question, "a", core.Reply{ResponseID: "r1", Answers: [][]string{{"green"}}})
		}, []string{"The user answered:\n\"Which colour for a?\" → \"green\""}},
		{"approved, then an interrupt before the continuation wrote", []string{"deploy"}, func(t *testing.T, c *cancelRun) {
			c.interruptBeforeContinuing(t, permission, "deploy", permReply("r1", core.ReplyOnce, ""))
		}, []string{runner.NotRun}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCancelRun(t, tc.calls...)
			tc.end(t, c)
			c.n.Idle()
			assert.Equal(t, tc.want, c.nextTurnSees(t))
		})
	}
}
