package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A step's calls are numbered by their position in the answer, 0, 1, …,
// whatever indexes the provider streamed them under (some skip or start
// past 0): the recorded index, and the idempotency key derived from it
// (DESIGN §2), do not depend on the provider's numbering.
func TestCallIndexesArePositionsNotProviderIndexes(t *testing.T) {
	tr := treetest.New(t)
	l := newLedger()
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "a", Name: "first", Arguments: `{}`}},
				{ToolCall: &model.ToolCallDelta{Index: 3, ID: "b", Name: "second", Arguments: `{}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("done")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), l.tool("first", true), l.tool("second", true)))
	sid := n.NewSession("s")
	n.Admit(sid, "call two tools")
	n.Idle()

	done := treetest.OfType(tr.Events(sid), event.StepCompleted)
	require.NotEmpty(t, done)
	var step event.StepDone
	require.NoError(t, done[0].Decode(&step))
	require.Len(t, step.ToolCalls, 2)
	keys := map[string]string{}
	for i, c := range step.ToolCalls {
		assert.Equal(t, i, c.Index, "call %s", c.Name)
		keys[c.CallID] = runner.IdempotencyKey(sid, sid, step.StepID, i)
	}
	assert.Equal(t, []string{"first", "second"}, []string{step.ToolCalls[0].Name, step.ToolCalls[1].Name})
	execs := treetest.OfType(tr.Events(sid), event.ToolExecuting)
	require.Len(t, execs, 2)
	for _, ev := range execs {
		var x event.Executing
		require.NoError(t, ev.Decode(&x))
		assert.Equal(t, keys[x.CallID], x.IdempotencyKey, "call %s's key is derived from its position", x.CallID)
	}
	assert.Equal(t, 1, l.count("first"))
	assert.Equal(t, 1, l.count("second"))
}
