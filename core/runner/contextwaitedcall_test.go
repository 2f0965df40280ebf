package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A call whose turn ended while it waited on a person is sent what the
// person's wait came to (a question cancelled by the interrupt, here),
// which may be longer than a made-up NoResult: fitting counts it at the
// longest its elided marker can be, never less than it is sent. A request
// one byte past the context size with every output elided leaves out the
// exchange of that call and then fits. Counted as a NoResult, the call's
// text would let the request go out a byte past the context size.
func TestWaitedCallOfAnEndedTurnCountsAtItsSentSize(t *testing.T) {
	whole := requestAfterAnInterruptedQuestion(t, 1<<30)
	require.Equal(t, -1, omittedCount(whole))
	require.Equal(t, []string{endedByInterrupt}, toolTexts(whole))
	budget := leastBytes(whole) - 1

	req := requestAfterAnInterruptedQuestion(t, budget)
	assert.LessOrEqual(t, requestTextBytes(req), budget, "the request fits")
	assert.Equal(t, 3, omittedCount(req), "the question's exchange is left out: its prompt, the call and its result")
}

// requestAfterAnInterruptedQuestion runs, with a context size of budget, a
// turn whose step asks a question and is interrupted while it waits, then
// two turns of 1000 byte prompts, and returns the last request.
func requestAfterAnInterruptedQuestion(t *testing.T, budget int) model.Request {
	tr := treetest.New(t)
	m := &onPromptModel{prompt: "ask", script: toolCall(tool.QuestionName, `{"questions":[{"question":"Which colour?","choices":["red","green"]}]}`)}
	n := tr.Boot(newRunner(t, m, runner.NewConfig().WithContextBytes(budget), tool.QuestionTool()))
	sid := n.NewSession("s")
	n.Admit(sid, "ask")
	n.Idle()
	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	for i := range 2 {
		n.Admit(sid, prompt(i, 1000, 0))
		n.Idle()
	}
	return m.Last()
}
