package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A session's permission rules are validated at creation: a bad rule is a
// 400 invalid_request naming it, and nothing is created; good rules are
// stored with the session and shown in its snapshot.
func TestCreateSessionPermissionRules(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(8), nil)
	c := f.client(t, "")
	for _, tc := range []struct{ body, msg string }{
		{`{"config":{"permissions":[{"action":"http_request","resource":"*","decision":"sometimes"}]}}`,
			`config field "permissions[0].decision": must be "allow", "ask" or "deny"`},
		{`{"config":{"permissions":[{"action":"http request","resource":"*","decision":"ask"}]}}`,
			`config field "permissions[0].action": must be a tool name, with '*' for any run of characters (letters, digits, '_', '-', '*')`},
		{`{"config":{"permissions":"allow everything"}}`,
			`config field "permissions" must be an array of rules {"action", "resource", "decision"}`},
		{`{"config":{"permissions":[{"action":"t","resource":"*","decision":"ask","Decision":"allow"}]}}`, ``},
	} {
		var e api.ErrorBody
		require.Equal(t, http.StatusBadRequest, c.do("POST", "/v1/sessions", tc.body, &e), tc.body)
		assert.Equal(t, api.ErrInvalidRequest, e.Error.Type, tc.body)
		if tc.msg != "" {
			assert.Equal(t, tc.msg, e.Error.Message, tc.body)
		}
	}
	assert.Empty(t, f.trees.trees, "nothing was created")

	var out struct{ ID string }
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/sessions",
		`{"config":{"permissions":[{"action":"http_request","resource":"http:*.example.com","decision":"allow"}]}}`, &out))
	var snap struct{ Config core.SessionConfig }
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+out.ID, "", &snap))
	assert.Equal(t, []permission.Rule{{Action: "http_request", Resource: "http:*.example.com", Decision: permission.Allow}}, snap.Config.Permissions)
}
