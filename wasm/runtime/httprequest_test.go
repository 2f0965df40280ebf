package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// The guest decides an http_request call's permission itself, from the
// call's arguments alone (tools/web/httpargs): a call to
// API.Example.com:8443 asks for "http:api.example.com" and parks the turn
// before the host is asked to send anything.
func TestGuestHTTPRequestResources(t *testing.T) {
	cfg := openaiConfig()
	cfg.Tools = []abi.ToolDecl{{Kind: abi.ToolHTTPRequest, Name: "http_request", Schema: []byte(`{"type":"object"}`), Permission: "ask"}}
	e := newEnv(t, 4, cfg)
	require.NoError(t, e.boot(runtime.Options{}))
	var started []runtime.EgressRequest
	var ids []uint64
	e.s.onEgress = func(id uint64, req runtime.EgressRequest) {
		ids = append(ids, id)
		started = append(started, req)
	}
	e.createAndPrompt("fetch it")
	require.Len(t, started, 1)
	require.Equal(t, abi.EgressModel, started[0].Kind)
	e.answerToolCall(ids[0], "http_request", `{"method":"post","url":"https://API.Example.com.:8443/x","body":"b"}`)

	require.Len(t, started, 1, "an asked call is not sent")
	parked := e.s.emitted("session.step.parked@1")
	require.Len(t, parked, 1, "the call waits for a person")
	kind, action, resources := oneBlocker(t, parked[0].Data)
	require.Equal(t, "permission", kind)
	require.Equal(t, "http_request", action)
	require.Equal(t, []string{"http:api.example.com"}, resources)
}

// oneBlocker reads the one blocker of a step.parked event's data.
func oneBlocker(t *testing.T, parked []byte) (kind, action string, resources []string) {
	t.Helper()
	var data struct {
		Blockers []struct {
			Kind    string `json:"kind"`
			Request struct {
				Action    string   `json:"action"`
				Resources []string `json:"resources"`
			} `json:"request"`
		} `json:"blockers"`
	}
	require.NoError(t, json.Unmarshal(parked, &data), string(parked))
	require.Len(t, data.Blockers, 1, string(parked))
	return data.Blockers[0].Kind, data.Blockers[0].Request.Action, data.Blockers[0].Request.Resources
}

// A webhook tool's one resource is "tool:" and its name: a call that asks
// parks on exactly that, so a rule for "tool:hook" decides it.
func TestGuestWebhookResourceIsToolColonName(t *testing.T) {
	e, ids := hookCalled(t, 4, "ask")
	require.Len(t, ids, 1, "an asked call is not sent")
	parked := e.s.emitted("session.step.parked@1")
	require.Len(t, parked, 1)
	_, action, resources := oneBlocker(t, parked[0].Data)
	require.Equal(t, "hook", action)
	require.Equal(t, []string{"tool:hook"}, resources)
}
