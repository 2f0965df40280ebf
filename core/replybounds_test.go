package core

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reply's message of exactly MaxReplyMessage bytes is taken by both
// adapters that read one (the bound is "at most", as docs/api.md says);
// one byte more is refused. The refused side is TestQuestionRepliesAreJudged's.
func TestReplyMessageOfExactlyTheCapIsTaken(t *testing.T) {
	atCap := strings.Repeat("m", MaxReplyMessage)
	question := json.RawMessage(`{"questions":[{"question":"Which size?","choices":["S","M"]}]}`)

	v, err := questionV1{}.Judge(question, Reply{Answers: [][]string{{"M"}}, Message: atCap})
	require.NoError(t, err, "an answer with a message of exactly the cap")
	assert.Equal(t, BlockerAnswered, v.State)
	v, err = questionV1{}.Judge(question, Reply{Cancel: true, Message: atCap})
	require.NoError(t, err, "a cancel with a message of exactly the cap")
	assert.Equal(t, BlockerCancelled, v.State)

	v, err = permissionV1{}.Judge(nil, Reply{Decision: ReplyReject, Message: atCap})
	require.NoError(t, err, "a reject with a message of exactly the cap")
	assert.Equal(t, BlockerRejected, v.State)
	_, err = permissionV1{}.Judge(nil, Reply{Decision: ReplyReject, Message: atCap + "m"})
	assert.ErrorIs(t, err, ErrInvalid, "one byte past the cap")
}
