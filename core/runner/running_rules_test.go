package runner_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/tool"
)

// recordingDeploy is the deploy tool, keeping every call its body gets.
type recordingDeploy struct {
	*deployTool
	mu    sync.Mutex
	calls []tool.Call
}

func (r *recordingDeploy) Execute(ctx context.Context, c tool.Call) (string, error) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return r.deployTool.Execute(ctx, c)
}

// A running call carries, beside its Permit, the session's own rules and
// the tree's saved always rules it was decided by, for a proxy that hands
// the decision to another process (a wasm guest's host): the session's
// rule from its config at creation, the rule an always reply saved, and
// the Permit agreeing with them (the operator's deny still final).
func TestRunningCallCarriesSessionAndSavedRules(t *testing.T) {
	c := newPermRun(t, false)
	c.cfg = c.cfg.WithPermissions([]permission.Rule{{Action: "deploy", Resource: "target:prod", Decision: permission.Deny}})
	rec := &recordingDeploy{deployTool: c.d}
	n := c.tr.Boot(newRunner(t, c.m, c.cfg, rec))
	session := permission.Rule{Action: "deploy", Resource: "target:a*", Decision: permission.Allow}
	conf, err := json.Marshal(core.SessionConfig{Permissions: []permission.Rule{session, {Action: "deploy", Resource: "target:prod", Decision: permission.Allow}}})
	require.NoError(t, err)
	_, err = n.Inst.CreateSession(ctx, core.NewSession{ID: c.sid, Principal: "tester", Config: conf})
	require.NoError(t, err)

	c.admit(t, n, "p1", "deploy b")
	n.Idle()
	asked := permissions(t, n, c.sid)
	require.Len(t, asked, 1)
	_, err = n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyAlways, ""))
	require.NoError(t, err)
	n.Idle()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.calls, 1)
	call := rec.calls[0]
	assert.Equal(t, []permission.Rule{session, {Action: "deploy", Resource: "target:prod", Decision: permission.Allow}}, call.SessionRules)
	assert.Equal(t, []permission.Rule{{Action: "deploy", Resource: "target:b", Decision: permission.Allow, Exact: true}}, call.SavedRules)
	require.NotNil(t, call.Permit)
	assert.NoError(t, call.Permit("target:alpha"), "the session's rule allows")
	assert.NoError(t, call.Permit("target:b"), "the saved rule allows")
	assert.ErrorContains(t, call.Permit("target:c"), "would need approval")
	assert.ErrorContains(t, call.Permit("target:prod"), `declined by a permission rule (config "target:prod": deny)`, "the operator's deny is final")
}
