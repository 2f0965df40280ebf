package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Every JSON answer says no cache may keep it: a snapshot, a list or a
// blocker list carries a principal's transcript and ids, and a browser's
// disk cache (or a proxy that does not honour Authorization) would
// otherwise keep a copy after the page that asked for it is gone. Errors
// too: one may quote the request.
func TestJSONAnswersAreNoStore(t *testing.T) {
	auth, err := api.ParseTokens("alice:tok-a")
	require.NoError(t, err)
	alice := newFixture(t, treetest.NewDriver(4), auth).client(t, "tok-a")
	send := func(method, path, body string) *http.Response {
		resp := alice.send(method, path, body)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := send("POST", "/v1/sessions", "")
	require.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"), "create")
	var created struct{ ID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))

	resp = send("POST", "/v1/sessions/"+created.ID+"/prompt", `{"text":"hi"}`)
	require.Equal(t, 202, resp.StatusCode)
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"), "prompt")
	for _, path := range []string{"/v1/sessions", "/v1/sessions/" + created.ID, "/v1/sessions/" + created.ID + "/questions",
		"/v1/sessions/" + created.ID + "/permissions", "/v1/sessions/nope", "/healthz"} {
		assert.Equal(t, "no-store", send("GET", path, "").Header.Get("Cache-Control"), path)
	}
}
