package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

type permissionBody struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	SessionID string `json:"session_id"`
	CallID    string `json:"call_id"`
	Request   struct {
		Action    string   `json:"action"`
		Resources []string `json:"resources"`
		Rule      struct{ Action, Resource, Decision string }
		Source    string `json:"source"`
	} `json:"request"`
}

type permissionResolution struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	State      string `json:"state"`
	ResponseID string `json:"response_id"`
	Duplicate  bool   `json:"duplicate"`
	Reply      struct {
		Reply   string `json:"reply"`
		Message string `json:"message"`
	} `json:"reply"`
}

func (c *client) listPermissions(id string) []permissionBody {
	c.t.Helper()
	var out struct{ Permissions []permissionBody }
	require.Equal(c.t, http.StatusOK, c.do("GET", "/v1/sessions/"+id+"/permissions", "", &out))
	return out.Permissions
}

// A session whose own rule asks before kv_put on secret keys: the offline
// model's /tool call parks; the request is listed in the snapshot and the
// list; every bad reply is a typed 4xx that writes nothing; then first
// response wins (200, the same 200 again, 409 with the winner) and the
// approved call's effect lands.
func TestPermissionOverHTTP(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a,bob:secret-b")
	require.NoError(t, err)
	f := newFixture(t, offlineRunner(t), tokens)
	alice, bob := f.client(t, "secret-a"), f.client(t, "secret-b")
	var created struct{ ID string }
	require.Equal(t, http.StatusCreated, alice.do("POST", "/v1/sessions",
		`{"config":{"permissions":[{"action":"kv_put","resource":"kv:secret*","decision":"ask"}]}}`, &created))
	id, other := created.ID, alice.create()
	require.Equal(t, http.StatusAccepted, alice.do("POST", "/v1/sessions/"+id+"/prompt",
		`{"text":`+jsonString(`/tool kv_put {"key":"secret-1","value":"42"}`)+`}`, nil))
	f.trees.tree(id).node.Idle()

	var snap struct {
		Status   string
		Blockers []permissionBody
	}
	require.Equal(t, http.StatusOK, alice.do("GET", "/v1/sessions/"+id, "", &snap))
	assert.Equal(t, "waiting", snap.Status)
	require.Len(t, snap.Blockers, 1)
	listed := alice.listPermissions(id)
	require.Len(t, listed, 1)
	p := listed[0]
	assert.Equal(t, snap.Blockers[0].ID, p.ID)
	assert.Equal(t, "p-"+p.CallID+"-0", p.ID)
	assert.Equal(t, "permission", p.Kind)
	assert.Equal(t, "kv_put", p.Request.Action)
	assert.Equal(t, []string{"kv:secret-1"}, p.Request.Resources)
	assert.Equal(t, "session", p.Request.Source)
	assert.Equal(t, "kv:secret*", p.Request.Rule.Resource)
	assert.Empty(t, alice.listQuestions(id), "a permission request is not a question")

	path := "/v1/sessions/" + id + "/permissions/" + p.ID
	before := alice.cursor(id)
	bad := []badReply{
		{"unknown request id", alice, "/v1/sessions/" + id + "/permissions/p-nope-0", `{"reply":"once","response_id":"r"}`, 404, api.ErrNotFound},
		{"a request of another tree", alice, "/v1/sessions/" + other + "/permissions/" + p.ID, `{"reply":"once","response_id":"r"}`, 404, api.ErrNotFound},
		{"another principal", bob, path, `{"reply":"once","response_id":"r"}`, 404, api.ErrNotFound},
		{"a question's route", alice, "/v1/sessions/" + id + "/questions/" + p.ID, `{"answers":[["yes"]],"response_id":"r"}`, 404, api.ErrNotFound},
		{"bad reply value", alice, path, `{"reply":"sometimes","response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"no reply", alice, path, `{"response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"missing response_id", alice, path, `{"reply":"once"}`, 400, api.ErrInvalidRequest},
		{"answers", alice, path, `{"reply":"once","answers":[["x"]],"response_id":"r"}`, 400, api.ErrInvalidRequest},
		{"a message with once", alice, path, `{"reply":"once","message":"fine","response_id":"r"}`, 400, api.ErrInvalidRequest},
	}
	assertRefused(t, bad)
	assert.Equal(t, before, alice.cursor(id), "nothing written for a bad reply")
	assert.Len(t, alice.listPermissions(id), 1, "still pending")

	var won permissionResolution
	require.Equal(t, http.StatusOK, alice.do("POST", path, `{"reply":"once","response_id":"r1"}`, &won))
	assert.Equal(t, "approved", won.State)
	assert.Equal(t, "once", won.Reply.Reply)
	var again permissionResolution
	require.Equal(t, http.StatusOK, alice.do("POST", path, `{"reply":"once","response_id":"r1"}`, &again))
	assert.True(t, again.Duplicate, "the same response_id again is the original outcome")
	var conflict struct {
		Error  struct{ Type api.ErrorType }
		Winner permissionResolution
	}
	require.Equal(t, http.StatusConflict, alice.do("POST", path, `{"reply":"reject","response_id":"r2"}`, &conflict))
	assert.Equal(t, api.ErrConflict, conflict.Error.Type)
	assert.Equal(t, "r1", conflict.Winner.ResponseID, "the 409 carries the winner")
	assert.Equal(t, "approved", conflict.Winner.State)
	require.Equal(t, http.StatusConflict, alice.do("POST", path, `{"reply":"always","response_id":"r1"}`, &conflict),
		"the same response_id with another body is a conflict")

	f.trees.tree(id).node.Idle()
	var done struct {
		Status string
		Turns  int
	}
	require.Equal(t, http.StatusOK, alice.do("GET", "/v1/sessions/"+id, "", &done))
	assert.Equal(t, "idle", done.Status)
	assert.Equal(t, 1, done.Turns)
	evs := f.trees.tree(id).tree.Events(id)
	assert.Len(t, treetest.OfType(evs, event.PermissionApproved), 1)
	assert.Empty(t, alice.listPermissions(id))
}
