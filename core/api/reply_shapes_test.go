package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
)

// Odd reply shapes answer a typed 4xx, never a 500.
func TestOddReplyShapesAnswer4xx(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a")
	require.NoError(t, err)
	f := newFixture(t, offlineRunner(t), tokens)
	alice := f.client(t, "secret-a")
	id := alice.create()
	require.Equal(t, http.StatusAccepted, alice.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":`+jsonString(choicePrompt)+`}`, nil))
	f.trees.tree(id).node.Idle()
	q := alice.listQuestions(id)[0]
	path := "/v1/sessions/" + id + "/questions/" + q.ID
	for _, c := range []struct{ path, body string }{
		{path, `{"answers":null,"response_id":"r"}`},
		{path, `{"answers":[null],"response_id":"r"}`},
		{path, `{"answers":"red","response_id":"r"}`},
		{path, `{"answers":[["red",null]],"response_id":"r"}`},
		{path, `{"answers":[{"a":1}],"response_id":"r"}`},
		{path, `{"answers":[["red"]],"response_id":"` + strings.Repeat("x", 300) + `"}`},
		{path, `{"answers":[["red"]],"response_id":7}`},
		{path, `[]`},
		{path, `{"answers":[["red"]],"response_id":"r","child":{"state":"succeeded","text":"x"}}`},
		{"/v1/sessions/" + id + "/permissions/" + q.ID, `{"reply":"once","response_id":"r"}`},
		{"/v1/sessions/" + id + "/questions/" + strings.Repeat("%00", 10), `{"answers":[["red"]],"response_id":"r"}`},
	} {
		status, typ := alice.errorType("POST", c.path, c.body)
		assert.True(t, status >= 400 && status < 500, "%s %s: %d %s", c.path, c.body, status, typ)
	}
}
