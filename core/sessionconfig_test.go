package core_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/permission"
)

// A session's permission rules are parsed strictly and validated with the
// rule syntax's own messages, naming the rule by its index.
func TestSessionConfigPermissions(t *testing.T) {
	c, err := core.ParseSessionConfig(json.RawMessage(`{"permissions":[
		{"action":"http_request","resource":"http:*.example.com","decision":"allow"},
		{"action":"kv_put","resource":"kv:a*b","decision":"ask","exact":true}]}`))
	require.NoError(t, err)
	assert.Equal(t, []permission.Rule{
		{Action: "http_request", Resource: "http:*.example.com", Decision: permission.Allow},
		{Action: "kv_put", Resource: "kv:a*b", Decision: permission.Ask, Exact: true},
	}, c.Permissions)
	out, err := json.Marshal(c)
	require.NoError(t, err)
	back, err := core.ParseSessionConfig(out)
	require.NoError(t, err)
	assert.Equal(t, c, back, "a stored config reads back the same")

	bad := []struct{ body, msg string }{
		{`{"permissions":{}}`, `config field "permissions" must be an array of rules {"action", "resource", "decision"}`},
		{`{"permissions":[1]}`, `config field "permissions" must be an array of rules {"action", "resource", "decision"}`},
		{`{"permissions":[{"action":"t","resource":"*","decision":"allow","exact":"yes"}]}`, `config field "permissions[0].exact" must be true or false`},
		{`{"permissions":[{"action":"t","resource":"*","decision":"allow"},{"action":7,"resource":"*","decision":"allow"}]}`, `config field "permissions[1].action" must be a string`},
		{`{"permissions":[{"action":"t","resource":"*","decision":"allow","why":"x"}]}`, `unknown field "why"`},
		{`{"permissions":[{"action":"t","resource":"*","decision":"maybe"}]}`, `config field "permissions[0].decision": must be "allow", "ask" or "deny"`},
		{`{"permissions":[{"action":"t","resource":"*","decision":"allow"},{"resource":"*","decision":"allow"}]}`, `config field "permissions[1].action": must be 1 to 64 characters`},
		{`{"permissions":[{"action":"a b","resource":"*","decision":"allow"}]}`, `config field "permissions[0].action": must be a tool name`},
		{`{"permissions":[{"action":"t","resource":"","decision":"deny"}]}`, `config field "permissions[0].resource": must be 1 to 1024 bytes, not blank`},
		// Only the operator's rules can be final: a client's would mean nothing
		// in the overlay, and is refused rather than ignored.
		{`{"permissions":[{"action":"t","resource":"*","decision":"allow"},{"action":"t","resource":"*","decision":"ask","final":true}]}`, `config field "permissions[1].final": only the server's rules can be final`},
		{`{"permissions":[{"action":"t","resource":"*","decision":"ask","final":"yes"}]}`, `config field "permissions[0].final" must be true or false`},
	}
	for _, b := range bad {
		_, err := core.ParseSessionConfig(json.RawMessage(b.body))
		require.Error(t, err, b.body)
		assert.True(t, errors.Is(err, core.ErrInvalid), b.body)
		assert.Contains(t, err.Error(), b.msg, b.body)
	}
	many, err := json.Marshal(map[string]any{"permissions": make([]permission.Rule, permission.MaxRules+1)})
	require.NoError(t, err)
	_, err = core.ParseSessionConfig(many)
	require.ErrorContains(t, err, `config field "permissions": at most 256 rules, not 257`)
}
