package api_test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/treetest"
)

// session_defaults only fill what a create left out: a create that gives
// every field keeps each of its own, the system prompt included (a default
// system prompt must not replace the one a client wrote for its session).
func TestSessionDefaultsNeverReplaceTheRequestsOwnFields(t *testing.T) {
	defaultTools := []string{"kv_get"}
	h, err := api.New(api.Deps{Trees: newMemTrees(t, treetest.NewDriver(4)), Auth: api.Anonymous{}, Clock: fakehost.NewClock(treetest.Start), IDs: &fakehost.IDs{Prefix: "r"}},
		api.NewConfig().WithSessionDefaults(core.SessionConfig{SystemPrompt: "be brief", Model: "small", Tools: &defaultTools}))
	require.NoError(t, err)
	srv := httptest.NewServer(nethttp.Handler(h))
	defer srv.Close()
	defer h.Close()
	c := &client{t: t, srv: srv}

	var out struct{ ID string }
	require.Equal(t, 201, c.do("POST", "/v1/sessions", `{"config":{"system_prompt":"be thorough","model":"large","tools":["kv_put"]}}`, &out))
	var snap struct{ Config core.SessionConfig }
	require.Equal(t, 200, c.do("GET", "/v1/sessions/"+out.ID, "", &snap))
	assert.Equal(t, "be thorough", snap.Config.SystemPrompt)
	assert.Equal(t, "large", snap.Config.Model)
	require.NotNil(t, snap.Config.Tools)
	assert.Equal(t, []string{"kv_put"}, *snap.Config.Tools)
}
