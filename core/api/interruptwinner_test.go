package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reply to a question an interrupt cancelled is a 409 whose winner is
// that cancellation: state cancelled, reason interrupt, and no reply or
// response_id, since no person replied (docs/api.md: "reply is absent
// when an interrupt cancelled it"). An empty reply object would read as
// a reply with no answers.
func TestWinnerCancelledByAnInterruptCarriesNoReply(t *testing.T) {
	f := newFixture(t, offlineRunner(t), nil)
	c := f.client(t, "")
	id := c.create()
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":`+jsonString(choicePrompt)+`}`, nil))
	f.trees.tree(id).node.Idle()
	listed := c.listQuestions(id)
	require.Len(t, listed, 1)
	require.Equal(t, http.StatusOK, c.do("POST", "/v1/sessions/"+id+"/interrupt", "", nil))

	var conflict struct{ Winner map[string]json.RawMessage }
	require.Equal(t, http.StatusConflict, c.do("POST", "/v1/sessions/"+id+"/questions/"+listed[0].ID, `{"answers":["red"],"response_id":"late"}`, &conflict))
	assert.JSONEq(t, `"cancelled"`, string(conflict.Winner["state"]))
	assert.JSONEq(t, `"interrupt"`, string(conflict.Winner["reason"]))
	assert.NotContains(t, conflict.Winner, "reply")
	assert.NotContains(t, conflict.Winner, "response_id")
}
