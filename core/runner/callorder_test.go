package runner_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// The calls of one answer run one after another in the order the model
// made them: a model that writes a file and then reads it back relies on
// it. (A plant that loaded a step's unsettled calls in reverse index order
// passed every other test of the package.)
func TestCallsOfOneStepRunInTheModelsOrder(t *testing.T) {
	tr := treetest.New(t)
	var mu sync.Mutex
	var ran []string
	record := func(name string) tool.Tool {
		return tool.Func{DefaultPermission: "allow", Name: name, Run: func(context.Context, tool.Call) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, name)
			return name + " done", nil
		}}
	}
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "c0", Name: "write", Arguments: `{}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "c1", Name: "read", Arguments: `{}`}},
				{ToolCall: &model.ToolCallDelta{Index: 2, ID: "c2", Name: "delete", Arguments: `{}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("ok")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), record("write"), record("read"), record("delete")))
	n.NewSession("s")
	n.Admit("s", "write, read, delete")
	n.Idle()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"write", "read", "delete"}, ran)
	assert.Equal(t, []string{"write done", "read done", "delete done"}, toolTexts(m.lastReq))
}
