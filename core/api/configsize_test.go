package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/internal/treetest"
)

// configBody is a create body whose config has a system prompt of
// promptLen '<' and rules rules, each with a resource of 1 KiB of '<':
// within every field's own bound, but six times larger as stored.
func configBody(t *testing.T, promptLen, rules int) string {
	t.Helper()
	c := core.SessionConfig{SystemPrompt: strings.Repeat("<", promptLen)}
	for range rules {
		c.Permissions = append(c.Permissions, permission.Rule{Action: "http_request", Resource: strings.Repeat("<", permission.MaxResourceLen), Decision: permission.Ask})
	}
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	// Sent unescaped, as a client may: the body stays small.
	raw = []byte(strings.ReplaceAll(string(raw), `\u003c`, "<"))
	return `{"config":` + string(raw) + `}`
}

// A config within every field's bound but over MaxStoredConfig as stored
// (JSON writes '<' in six bytes) is refused 413 before anything is
// written: a Durable Object would refuse its session.created (over 2 MB)
// only after doing work. The front Worker's check (DecodeCreate) refuses
// it alike.
func TestCreateRefusesConfigTooLargeToStore(t *testing.T) {
	body := configBody(t, api.MaxSystemPrompt, permission.MaxRules)
	require.Less(t, len(body), 600<<10, "the body itself is small")

	_, err := api.DecodeCreate([]byte(body))
	var ae *api.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, api.ErrPayloadTooLarge, ae.Type)
	assert.Contains(t, ae.Message, fmt.Sprintf("over the limit of %d bytes", api.MaxStoredConfig))

	f := newFixtureWith(t, treetest.NewDriver(4), nil, api.NewConfig())
	c := f.client(t, "")
	var e api.ErrorBody
	require.Equal(t, http.StatusRequestEntityTooLarge, c.do("POST", "/v1/sessions", body, &e))
	assert.Equal(t, api.ErrPayloadTooLarge, e.Error.Type)
	assert.Empty(t, f.trees.trees, "nothing was created")

	// Any one field at its bound fits, whatever its characters.
	for _, ok := range []string{configBody(t, api.MaxSystemPrompt, 0), configBody(t, 0, permission.MaxRules)} {
		_, err := api.DecodeCreate([]byte(ok))
		require.NoError(t, err)
	}

	// Just under the limit is stored, and its session.created is no
	// larger than the limit and the event's other fields.
	body = configBody(t, 100<<10, 150)
	var out struct{ ID string }
	require.Equal(t, http.StatusCreated, c.do("POST", "/v1/sessions", body, &out))
	evs, err := f.trees.trees[out.ID].node.Inst.Events(t.Context(), out.ID, 0, 1)
	require.NoError(t, err)
	require.Equal(t, event.SessionCreated, evs[0].Type)
	assert.Greater(t, len(evs[0].Data), 1_500_000)
	assert.Less(t, len(evs[0].Data), api.MaxStoredConfig+200)
}

// The server's defaults count: a config that fits alone but not with the
// default system prompt filled in is refused the same way.
func TestCreateRefusesConfigTooLargeWithDefaults(t *testing.T) {
	cfg := api.NewConfig().WithSessionDefaults(core.SessionConfig{SystemPrompt: strings.Repeat("a", 900<<10)})
	f := newFixtureWith(t, treetest.NewDriver(4), nil, cfg)
	c := f.client(t, "")
	body := `{"config":{"permissions":` + strings.TrimPrefix(strings.TrimSuffix(configBody(t, 0, 128), `}}`), `{"config":{"permissions":`) + `}}`
	_, err := api.DecodeCreate([]byte(body))
	require.NoError(t, err, "alone it fits")
	var e api.ErrorBody
	require.Equal(t, http.StatusRequestEntityTooLarge, c.do("POST", "/v1/sessions", body, &e))
	assert.Contains(t, e.Error.Message, "config with the server's defaults is ")
	assert.Empty(t, f.trees.trees, "nothing was created")
}
