package core_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/tool"
)

// The question's continuation is what the model reads of the user's
// reply: the answers, and the message sent with them. A message dropped
// here never reaches the model (the unsettled output, for a question whose
// turn ended before its continuation, says it; the continuation must too).
func TestAnsweredQuestionContinuationPassesOnTheMessage(t *testing.T) {
	ad, ok := core.AdapterFor(tool.QuestionAdapter)
	require.True(t, ok)
	req := json.RawMessage(`{"questions":[{"question":"which?","choices":["red","blue"]}]}`)
	c := ad.Continue([]core.ResolvedBlocker{{
		Blocker: core.Blocker{ID: "q-1", Kind: event.KindQuestion, Adapter: tool.QuestionAdapter, Request: req, State: core.BlockerAnswered},
		Reply:   core.Reply{Answers: [][]string{{"blue"}}, Message: "The darker one."},
	}})
	assert.Equal(t, event.OutcomeOK, c.Outcome)
	assert.Equal(t, "The user answered:\n\"which?\" → \"blue\"\nThe user added: The darker one.", c.Output)
}
