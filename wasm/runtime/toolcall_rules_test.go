package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// toolCallBody boots a guest with a webhook tool under a host announcing
// hostVersion (0: this one), creates a session with its own permission
// rules, has the model call the tool and returns the body of the guest's
// EgressTool request.
func toolCallBody(t *testing.T, hostVersion uint32, sessionRules []permission.Rule) []byte {
	t.Helper()
	cfg := openaiConfig()
	cfg.Tools = []abi.ToolDecl{{Kind: abi.ToolWebhook, Name: "hook", Permission: "allow"}}
	e := newEnv(t, 7, cfg)
	require.NoError(t, e.boot(runtime.Options{HostVersion: hostVersion}))
	var reqs []runtime.EgressRequest
	var ids []uint64
	e.s.onEgress = func(id uint64, req runtime.EgressRequest) { ids, reqs = append(ids, id), append(reqs, req) }
	r := e.do("POST", "/v1/sessions", map[string]any{"config": map[string]any{"permissions": sessionRules}})
	require.Equal(t, 201, r.status, r.body.String())
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "call it", "id": "p1"})
	require.Equal(t, 202, r.status, r.body.String())
	require.Len(t, reqs, 1)
	e.answerToolCall(ids[0], "hook", "{}")
	require.Len(t, reqs, 2, "the tool call went to the host")
	require.Equal(t, abi.EgressTool, reqs[1].Kind)
	return reqs[1].Body
}

// A guest sends its session's rules with a tool call to a host of ABI 1.5
// (the host decides the call's redirects by them), and the 1.4 layout,
// without them, to a 1.4 host, whose decoder refuses trailing bytes.
func TestToolCallCarriesSessionRulesToANewHost(t *testing.T) {
	rules := []permission.Rule{{Action: "http_request", Resource: "http:evil.example", Decision: permission.Deny}}

	call, err := abi.DecodeToolCall(toolCallBody(t, 0, rules))
	require.NoError(t, err)
	require.Equal(t, rules, call.SessionRules)
	require.Empty(t, call.SavedRules)

	old := toolCallBody(t, abi.PackVersion(abi.Major, abi.MinorToolCallRules-1), rules)
	call, err = abi.DecodeToolCall(old)
	require.NoError(t, err)
	require.Nil(t, call.SessionRules)
	require.Equal(t, call.EncodeFor(abi.MinorToolCallRules-1), old, "nothing past the 1.4 fields")
}
