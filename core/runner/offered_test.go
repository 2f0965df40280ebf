package runner_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A session whose config restricts its tools is offered only those, and a
// call of another tool the model makes anyway (models invent calls) does
// not run, ask or start anything: it settles as a tool that does not
// exist, whatever kind of tool it names.
func TestToolNotOfferedDoesNotRun(t *testing.T) {
	for _, tc := range []struct{ name, args string }{
		{"act", `{}`},
		{"question", `{"questions":[{"question":"Which colour?","choices":["red","green"]}]}`},
		{"task", `{"prompt":"hello"}`},
		{"task", `{"prompt":"hello","background":true}`},
	} {
		t.Run(tc.name+tc.args, func(t *testing.T) {
			tr := treetest.New(t)
			led := newLedger()
			m := &scriptModel{steps: func(k int) scriptStep {
				if k == 1 {
					return scriptStep{chunks: toolCall(tc.name, tc.args)}
				}
				return scriptStep{chunks: text("done")}
			}}
			n := tr.Boot(newRunner(t, m, runner.NewConfig(), led.tool("act", true), led.tool("other", true), tool.QuestionTool(), tool.Task()))
			_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "p", Config: json.RawMessage(`{"tools":["other"]}`)})
			require.NoError(t, err)
			_, err = n.Inst.Admit(ctx, "s", core.PromptInput{ClientID: "p1", Text: "hello"})
			require.NoError(t, err)
			n.Idle()

			var offered []string
			for _, spec := range m.lastReq.Tools {
				offered = append(offered, spec.Name)
			}
			assert.Equal(t, []string{"other"}, offered)
			evs := tr.Events("s")
			settled := settlements(t, evs)
			require.Len(t, settled, 1)
			assert.Equal(t, event.OutcomeError, settled[0].Outcome)
			assert.Equal(t, `There is no tool named "`+tc.name+`".`, settled[0].Output)
			assert.Zero(t, led.count("act"), "not run")
			assert.Empty(t, treetest.OfType(evs, event.StepParked), "nothing asked")
			assert.Empty(t, treetest.OfType(evs, event.ToolExecuting), "nothing started")
			_, err = n.Inst.Session(ctx, "s.1")
			assert.ErrorIs(t, err, core.ErrNotFound, "no sub-agent")
			assert.Len(t, treetest.Terminals(evs), 1)
		})
	}
}

// unreadable is a tool whose arguments never say what it would touch.
type unreadable struct{ tool.Func }

func (unreadable) Resources(json.RawMessage) ([]string, error) {
	return nil, errors.New("no target named")
}

// A call whose arguments do not say what it would touch is not
// authorized, so it does not run: the model reads why.
func TestCallWithUnreadableResourcesDoesNotRun(t *testing.T) {
	tr := treetest.New(t)
	led := newLedger()
	deploy := unreadable{led.tool("deploy", true).(tool.Func)}
	n := tr.Boot(newRunner(t, oneToolThenAnswer("deploy"), runner.NewConfig(), deploy))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "deploy it")
	n.Idle()
	require.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Zero(t, led.count("deploy"), "not run")
	s := settlements(t, tr.Events(sid))
	require.Len(t, s, 1)
	assert.Equal(t, event.OutcomeError, s[0].Outcome)
	assert.Equal(t, "The deploy call did not run: its arguments do not say what it would touch: no target named.", s[0].Output)
}
