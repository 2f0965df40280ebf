package core

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/tool"
)

// The question adapter judges a reply itself, whatever checked it before:
// a Go program embedding core calls Reply with no HTTP decoding in front.
// Each answer list fits its question (choices offered, one unless
// multiple, no repeats, no blanks, bounded), and a reply is answers or a
// cancel, never both.
func TestQuestionRepliesAreJudged(t *testing.T) {
	request := json.RawMessage(`{"questions":[
		{"question":"Which colours?","choices":["red","green","blue"],"multiple":true},
		{"question":"Which size?","choices":["S","M"]},
		{"question":"Anything else?"}]}`)
	valid := [][]string{{"red", "green"}, {"M"}, {"no"}}
	with := func(i int, a []string) [][]string {
		out := append([][]string(nil), valid...)
		out[i] = a
		return out
	}
	refused := map[string]Reply{
		"answers and cancel":              {Answers: valid, Cancel: true},
		"one list short":                  {Answers: valid[:2]},
		"an empty list":                   {Answers: with(1, nil)},
		"a choice not offered":            {Answers: with(0, []string{"red", "pink"})},
		"two answers to a single choice":  {Answers: with(1, []string{"S", "M"})},
		"a choice repeated":               {Answers: with(0, []string{"red", "red"})},
		"a choice repeated among others":  {Answers: with(0, []string{"red", "green", "red"})},
		"a blank free-text answer":        {Answers: with(2, []string{"  "})},
		"two free-text answers":           {Answers: with(2, []string{"a", "b"})},
		"a free-text answer over the cap": {Answers: with(2, []string{strings.Repeat("x", MaxAnswerLen+1)})},
		"a message over the cap":          {Answers: valid, Message: strings.Repeat("m", MaxReplyMessage+1)},
		"a permission's decision":         {Answers: valid, Decision: ReplyOnce},
		"a cancel with a decision":        {Cancel: true, Decision: ReplyReject},
	}
	for name, r := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := questionV1{}.Judge(request, r)
			assert.ErrorIs(t, err, ErrInvalid)
		})
	}

	v, err := questionV1{}.Judge(request, Reply{Answers: valid})
	require.NoError(t, err)
	assert.Equal(t, BlockerAnswered, v.State)
	v, err = questionV1{}.Judge(request, Reply{Answers: with(0, []string{"blue", "red", "green"})})
	require.NoError(t, err, "every choice once, in any order")
	assert.Equal(t, BlockerAnswered, v.State)
	v, err = questionV1{}.Judge(request, Reply{Answers: with(2, []string{strings.Repeat("x", MaxAnswerLen)})})
	require.NoError(t, err, "a free-text answer of exactly the cap")
	assert.Equal(t, BlockerAnswered, v.State)
	v, err = questionV1{}.Judge(request, Reply{Cancel: true})
	require.NoError(t, err)
	assert.Equal(t, Verdict{State: BlockerCancelled, Event: event.QuestionCancelled, EndTurn: true}, v)

	// One choice offered is still a choice: nothing else is an answer.
	one := json.RawMessage(`{"questions":[{"question":"Go ahead?","choices":["yes"]}]}`)
	_, err = questionV1{}.Judge(one, Reply{Answers: [][]string{{"no"}}})
	assert.ErrorIs(t, err, ErrInvalid, "an answer that is not the one choice offered")
	v, err = questionV1{}.Judge(one, Reply{Answers: [][]string{{"yes"}}})
	require.NoError(t, err)
	assert.Equal(t, BlockerAnswered, v.State)
}

// What a later turn's model reads about a question call its turn never
// settled says how the question ended, and passes on what the user wrote
// with a cancel; an answered one reads as its continuation would have.
func TestUnsettledQuestionOutput(t *testing.T) {
	request := json.RawMessage(`{"questions":[{"question":"Which colour?"}]}`)
	read := func(state, reason, reply string) string {
		t.Helper()
		text, ok := UnsettledQuestionOutput(tool.QuestionAdapter, state, reason, request, json.RawMessage(reply))
		require.True(t, ok, "%s %s", state, reason)
		return text
	}
	cancelled := read(BlockerCancelled, event.CancelReply, `{"cancel":true,"message":"ask me tomorrow"}`)
	assert.Contains(t, cancelled, "The user cancelled this question")
	assert.Contains(t, cancelled, "The user added: ask me tomorrow")
	assert.Contains(t, read(BlockerCancelled, event.CancelSibling, ``), "the user's reply to another request")
	assert.Contains(t, read(BlockerCancelled, event.CancelInterrupt, ``), "interrupted or replaced")
	answered := read(BlockerAnswered, "", `{"answers":[["green"]],"message":"thanks"}`)
	assert.Equal(t, "The user answered:\n\"Which colour?\" → \"green\"\nThe user added: thanks", answered)

	_, ok := UnsettledQuestionOutput(tool.QuestionAdapter, BlockerPending, "", request, nil)
	assert.False(t, ok, "a pending question: its turn did not end")
	_, ok = UnsettledQuestionOutput("question@0", BlockerAnswered, "", request, json.RawMessage(`{"answers":[["green"]]}`))
	assert.False(t, ok, "an adapter this build lacks")
}
