package tool_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/tool"
)

// A question call the person could not answer, or one that would store
// unbounded text, fails for the model to correct: every limit is named.
func TestParseQuestionsRefuses(t *testing.T) {
	q := func(qs ...map[string]any) json.RawMessage {
		b, err := json.Marshal(map[string]any{"questions": qs})
		require.NoError(t, err)
		return b
	}
	many := make([]map[string]any, tool.MaxQuestions+1)
	for i := range many {
		many[i] = map[string]any{"question": "q?"}
	}
	choices := make([]string, tool.MaxChoices+1)
	for i := range choices {
		choices[i] = strings.Repeat("c", i+1)
	}
	for _, tc := range []struct {
		name string
		args json.RawMessage
		want string
	}{
		{"not an object", json.RawMessage(`[]`), "the arguments must be"},
		{"no questions", q(), "ask from 1 to 10 questions, not 0"},
		{"too many questions", q(many...), "ask from 1 to 10 questions, not 11"},
		{"empty question", q(map[string]any{"question": "  "}), "question 1 is empty"},
		{"long question", q(map[string]any{"question": strings.Repeat("x", tool.MaxQuestionLen+1)}), "question 1 is longer than 4096 bytes"},
		{"too many choices", q(map[string]any{"question": "q?", "choices": choices}), "question 1 offers more than 20 choices"},
		{"multiple without choices", q(map[string]any{"question": "q?", "multiple": true}), "allows multiple answers but offers no choices"},
		{"empty choice", q(map[string]any{"question": "q?", "choices": []string{"a", " "}}), "question 1 offers an empty or repeated choice"},
		{"repeated choice", q(map[string]any{"question": "q?", "choices": []string{"a", "a"}}), "question 1 offers an empty or repeated choice"},
		{"long choice", q(map[string]any{"question": "ok?"}, map[string]any{"question": "q?", "choices": []string{"a", strings.Repeat("b", tool.MaxChoiceLen+1)}}), "question 2 offers a choice longer than 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tool.ParseQuestions(tc.args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	req, err := tool.ParseQuestions(q(map[string]any{"question": "q?", "choices": []string{"a", strings.Repeat("b", tool.MaxChoiceLen)}, "multiple": true}))
	require.NoError(t, err, "a choice of exactly the limit is fine")
	assert.True(t, req.Questions[0].Multiple)
}
