package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Event types of permission requests.
const (
	typeSettled            = "session.tool.settled@1"
	typePermissionApproved = "session.permission.approved@1"
	typePermissionRejected = "session.permission.rejected@1"
)

// pendingPermission is one request of GET …/permissions.
type pendingPermission struct {
	ID       string `json:"id"`
	PromptID string `json:"prompt_id"`
	CallID   string `json:"call_id"`
	Request  struct {
		Action    string   `json:"action"`
		Resources []string `json:"resources"`
	} `json:"request"`
}

func (s *server) permissions(sid string) []pendingPermission {
	s.t.Helper()
	var out struct {
		Permissions []pendingPermission `json:"permissions"`
	}
	s.do("GET", "/v1/sessions/"+sid+"/permissions", nil, http.StatusOK, &out)
	return out.Permissions
}

// TestPermissionAcrossSIGKILL: a session whose rule asks before kv_put on
// secret keys; the offline model's /tool call parks; the server is
// SIGKILLed while the call waits, restarted over the same data directory,
// and the same request id is approved (the call then runs once: kv_put's
// effect commits with its settlement) or rejected (it never runs; the turn
// ends interrupted{user}), in each mode of the server.
func TestPermissionAcrossSIGKILL(t *testing.T) {
	eachMode(t, func(t *testing.T) {
		t.Run("Once", func(t *testing.T) { permissionAcrossKill(t, "once") })
		t.Run("Reject", func(t *testing.T) { permissionAcrossKill(t, "reject") })
	})
}

func permissionAcrossKill(t *testing.T, reply string) {
	s := start(t, t.TempDir())
	var created struct {
		ID string `json:"id"`
	}
	s.do("POST", "/v1/sessions", map[string]any{"config": map[string]any{"permissions": []map[string]string{
		{"action": "kv_put", "resource": "kv:secret*", "decision": "ask"}}}}, http.StatusCreated, &created)
	sid := created.ID
	st := s.follow(sid, 0)
	a := s.prompt(sid, `/tool kv_put {"key":"secret-1","value":"42"}`)
	st.until("the step to park", isType(typeParked))
	st.close()
	ps := s.permissions(sid)
	require.Len(t, ps, 1, "one request pending")
	rid := ps[0].ID
	assert.Equal(t, a, ps[0].PromptID)
	assert.Equal(t, "kv_put", ps[0].Request.Action)
	assert.Equal(t, []string{"kv:secret-1"}, ps[0].Request.Resources)
	assert.Equal(t, "waiting", s.snapshot(sid).Status)
	s.kill()

	s = s.restart()
	again := s.permissions(sid)
	require.Len(t, again, 1, "still pending after the SIGKILL")
	assert.Equal(t, rid, again[0].ID, "the same request id after the restart")

	var won replyResult
	s.do("POST", "/v1/sessions/"+sid+"/permissions/"+rid, map[string]any{"reply": reply, "response_id": "reply-1"}, http.StatusOK, &won)
	assert.Equal(t, "reply-1", won.ResponseID)
	var conflict struct {
		Winner replyResult `json:"winner"`
	}
	s.do("POST", "/v1/sessions/"+sid+"/permissions/"+rid, map[string]any{"reply": "always", "response_id": "reply-2"}, http.StatusConflict, &conflict)
	assert.Equal(t, "reply-1", conflict.Winner.ResponseID)

	sum := s.settle(sid, a)
	assert.Empty(t, s.permissions(sid))
	assert.Equal(t, 1, sum.byType[typeParked])
	var settled []string
	for _, e := range sum.log {
		if e.Type == typeSettled {
			var p struct{ Outcome, Output string }
			require.NoError(t, json.Unmarshal(e.Data, &p))
			settled = append(settled, p.Outcome+": "+p.Output)
		}
	}
	if reply == "reject" {
		sum.requireEnd(t, a, typeInterrupted, "user")
		assert.Equal(t, 1, sum.byType[typePermissionRejected])
		assert.Equal(t, []string{"declined: The user declined this call; it did not run."}, settled, "the call never ran")
		return
	}
	sum.requireEnd(t, a, typeSucceeded, "")
	assert.Equal(t, 1, sum.byType[typePermissionApproved])
	assert.Equal(t, []string{"ok: stored secret-1"}, settled, "the call ran once, after the approval")
}
