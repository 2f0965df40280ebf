package runner_test

import (
	"context"
	"testing"

	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// chargeAndNote is a session whose first turn, "pay and note", ends by an
// interrupt while its one step's first call (charge) executes and before
// its second (note) started: charge has no result, its body may have run;
// note never ran. Later turns' requests tell the model so.
type chargeAndNote struct {
	tr    *treetest.Tree
	n     *treetest.Node
	sid   string
	pid   string // the interrupted prompt
	model *onPromptModel
	notes *ledger // counts the runs of note
}

// interruptChargeAndNote runs the first turn of a chargeAndNote session on
// a fresh tree, with a runner of cfg.
func interruptChargeAndNote(t *testing.T, cfg runner.Config) *chargeAndNote {
	m := &onPromptModel{prompt: "pay and note", script: []model.Chunk{
		{ToolCall: &model.ToolCallDelta{Index: 0, ID: "a", Name: "charge", Arguments: `{}`}},
		{ToolCall: &model.ToolCallDelta{Index: 1, ID: "b", Name: "note", Arguments: `{}`}},
		{Finish: model.FinishToolCalls},
	}}
	c := &chargeAndNote{tr: treetest.New(t), model: m, notes: newLedger()}
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	charge := tool.Func{DefaultPermission: "allow", Name: "charge", Run: func(context.Context, tool.Call) (string, error) {
		entered <- struct{}{}
		<-release // ignores cancellation: the interrupt commits without it
		return "charged", nil
	}}
	c.n = c.tr.Boot(newRunner(t, c.model, cfg, charge, c.notes.tool("note", true)))
	c.sid = c.n.NewSession("s")
	c.pid = c.n.Admit(c.sid, "pay and note")
	<-entered
	interruptPastGrace(t, c.tr, c.n, c.sid)
	return c
}

// run admits each prompt as its own turn, in order, and returns the last
// request the model received.
func (c *chargeAndNote) run(prompts ...string) model.Request {
	for _, p := range prompts {
		c.n.Admit(c.sid, p)
		c.n.Idle()
	}
	return c.model.Last()
}
