package runner_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// asked is how many requests the model has had.
func (m *deployModel) asked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// failure is the one session.execution.failed of sid.
func failure(t *testing.T, tr *treetest.Tree, sid string) event.Failed {
	t.Helper()
	fails := treetest.OfType(tr.Events(sid), event.ExecutionFailed)
	require.Len(t, fails, 1)
	var f event.Failed
	require.NoError(t, fails[0].Decode(&f))
	return f
}

// A session whose stored model the operator no longer allows (the API
// refuses such a create; this one was created before the list narrowed)
// fails its turn before any model request, with a reason that names the
// model; an allowed model runs as before.
func TestModelNotAllowedFailsBeforeAnyRequest(t *testing.T) {
	c := newPermRun(t, false)
	c.cfg = runner.NewConfig().WithAllowedModels([]string{"gpt-4o-mini"})
	n := c.boot(t)
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: c.sid, Principal: "p", Config: json.RawMessage(`{"model":"o1-pro-expensive"}`)})
	require.NoError(t, err)
	pid := c.admit(t, n, "p1", "hello")
	n.Idle()
	assert.Zero(t, c.m.asked(), "the provider is never asked")
	assert.Equal(t, "failed", c.tr.PromptState(pid))
	f := failure(t, c.tr, c.sid)
	assert.Equal(t, event.FailModelNotAllowed, f.Type)
	assert.Equal(t, `The session's model "o1-pro-expensive" is not allowed on this server (allowed: gpt-4o-mini); no model request was made.`, f.Message)
	assert.Empty(t, treetest.OfType(c.tr.Events(c.sid), event.StepStarted))

	for _, conf := range []string{`{"model":"gpt-4o-mini"}`, `{}`} {
		sid := "ok" + conf
		_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: sid, Principal: "p", Config: json.RawMessage(conf)})
		require.NoError(t, err)
		before := c.m.asked()
		_, err = n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "p1", Text: "deploy staging"})
		require.NoError(t, err)
		n.Idle()
		assert.Equal(t, before+1, c.m.asked(), "%s: an allowed model, or the runner's own, is asked", conf)
		assert.Empty(t, treetest.OfType(c.tr.Events(sid), event.ExecutionFailed), conf)
	}
}

// A turn parked while its model was allowed, resumed after the operator
// narrowed the list: the approved call still runs (a person approved it and
// it spends nothing on the provider), and the next model request is
// refused instead of made.
func TestModelNotAllowedAfterAPark(t *testing.T) {
	c := newPermRun(t, false)
	n := c.boot(t)
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: c.sid, Principal: "p", Config: json.RawMessage(`{"model":"old-model"}`)})
	require.NoError(t, err)
	pid := c.admit(t, n, "p1", "deploy staging")
	n.Idle()
	asked := permissions(t, n, c.sid)
	require.Len(t, asked, 1)
	n.Crash()

	c.cfg = runner.NewConfig().WithAllowedModels([]string{"new-model"})
	n2 := c.boot(t)
	requests := c.m.asked()
	_, err = n2.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyOnce, ""))
	require.NoError(t, err)
	n2.Idle()
	assert.Equal(t, 1, c.l.count("deploy"), "the approved call ran")
	assert.Equal(t, requests, c.m.asked(), "no model request after the list narrowed")
	assert.Equal(t, "failed", c.tr.PromptState(pid))
	assert.Equal(t, event.FailModelNotAllowed, failure(t, c.tr, c.sid).Type)
}

// A session's config overrides the runner's model and system prompt in
// every request its turns make; a session that names neither is asked
// with the runner's own.
func TestSessionConfigModelAndSystemPromptAreRequested(t *testing.T) {
	tr := treetest.New(t)
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: text("done")} }}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "p", Config: json.RawMessage(`{"model":"gpt-4o-mini","system_prompt":"Be brief."}`)})
	require.NoError(t, err)
	_, err = n.Inst.Admit(ctx, "s", core.PromptInput{ClientID: "p1", Text: "hello"})
	require.NoError(t, err)
	n.Idle()
	assert.Equal(t, "gpt-4o-mini", m.lastReq.Model, "the session's model is requested")
	assert.Equal(t, "Be brief.", m.lastReq.System, "with the session's system prompt")

	n.NewSession("plain")
	_, err = n.Inst.Admit(ctx, "plain", core.PromptInput{ClientID: "p1", Text: "hello"})
	require.NoError(t, err)
	n.Idle()
	assert.Equal(t, "script", m.lastReq.Model, "a session naming no model is asked with the runner's")
}
