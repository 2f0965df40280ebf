package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// policyTools is the operator's policy of the security probe's two
// findings, as REVENANT_CONFIG sections (and REVENANT_TOOLS on
// Cloudflare): one allowed model, and a final ask on kv_put.
const policyTools = `{"allowed_models": ["gpt-4o-mini"],
 "permissions": [{"action": "kv_put", "resource": "*", "decision": "ask", "final": true}]}`

// TestOperatorPolicy runs the probe's scenarios against the local server,
// in process and with guests (ABI 1.8 carries the policy to them).
func TestOperatorPolicy(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.json")
		require.NoError(t, os.WriteFile(path, []byte(policyTools), 0o600))
		operatorPolicy(t, startWith(t, filepath.Join(dir, "data"), "REVENANT_CONFIG="+path))
	})
}

// TestWorkerdOperatorPolicy: the same on Cloudflare's runtime, the policy
// in the REVENANT_TOOLS var.
func TestWorkerdOperatorPolicy(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdWith(t, "", "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay, "REVENANT_TOOLS:"+policyTools)
	operatorPolicy(t, w.client(t))
}

// operatorPolicy: a create naming a model outside the list is 400 naming
// the field; a session created with an allow-everything rule still asks
// before kv_put (the operator's ask is final), the request says so, an
// always reply approves that call only and saves no rule, and the next
// call asks again.
func operatorPolicy(t *testing.T, s *server) {
	var refused struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	s.do("POST", "/v1/sessions", map[string]any{"config": map[string]any{"model": "o1-pro-expensive"}}, http.StatusBadRequest, &refused)
	assert.Equal(t, "invalid_request", refused.Error.Type)
	assert.Equal(t, `config field "model": "o1-pro-expensive" is not allowed on this server (allowed: gpt-4o-mini)`, refused.Error.Message)

	var created struct {
		ID string `json:"id"`
	}
	s.do("POST", "/v1/sessions", map[string]any{"config": map[string]any{"model": "gpt-4o-mini",
		"permissions": []map[string]string{{"action": "*", "resource": "*", "decision": "allow"}}}}, http.StatusCreated, &created)
	sid := created.ID

	ask := func(key string) (promptID, requestID string) {
		t.Helper()
		st := s.follow(sid, s.snapshot(sid).Cursor)
		promptID = s.prompt(sid, `/tool kv_put {"key":"`+key+`","value":"1"}`)
		st.until("the step to park", forPrompt(typeParked, promptID))
		st.close()
		var out struct {
			Permissions []struct {
				ID      string `json:"id"`
				Request struct {
					Resources []string        `json:"resources"`
					Final     []string        `json:"final"`
					Rule      json.RawMessage `json:"rule"`
				} `json:"request"`
			} `json:"permissions"`
		}
		s.do("GET", "/v1/sessions/"+sid+"/permissions", nil, http.StatusOK, &out)
		require.Len(t, out.Permissions, 1, "the final ask asks despite the session's allow")
		p := out.Permissions[0]
		assert.Equal(t, []string{"kv:" + key}, p.Request.Resources)
		assert.Equal(t, []string{"kv:" + key}, p.Request.Final, "the request says an always reply covers this call only")
		assert.JSONEq(t, `{"action":"kv_put","resource":"*","decision":"ask","final":true}`, string(p.Request.Rule))
		return promptID, p.ID
	}

	a, rid := ask("release")
	s.do("POST", "/v1/sessions/"+sid+"/permissions/"+rid, map[string]any{"reply": "always", "response_id": "r1"}, http.StatusOK, nil)
	sum := s.settle(sid, a)
	sum.requireEnd(t, a, typeSucceeded, "")
	assert.Equal(t, 1, sum.byType[typePermissionApproved])
	assert.Zero(t, sum.byType["session.permission.rule_saved@1"], "no rule saved for a final ask")

	ask("release") // the same call again asks again
}
