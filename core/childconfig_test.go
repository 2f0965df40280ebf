package core_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
)

// A sub-agent runs under its parent's config, as docs/api.md says of a
// session's config ("a sub-agent's is its parent's"): its system prompt,
// model, tools and permission rules. A child created without it would run
// with the server's defaults, offered tools and allowed calls its parent's
// session config took away; a grandchild inherits it the same way.
func TestSubAgentTakesItsParentsConfig(t *testing.T) {
	ctx := context.Background()
	config := json.RawMessage(`{"system_prompt":"be brief","tools":["kv_get"],"permissions":[{"action":"kv_get","resource":"*","decision":"deny"}]}`)
	_, n, d, _, rx := rootTurnHeld(t, config)

	spec := core.ChildSpec{Prompt: "hold", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents}
	spec.CallID = "call-1"
	child, err := rx.StartChild(ctx, spec)
	require.NoError(t, err)
	cx := <-d.Started
	spec.CallID = "call-2"
	grandchild, err := cx.StartChild(ctx, spec)
	require.NoError(t, err)
	<-d.Started

	for _, id := range []string{child.ID, grandchild.ID} {
		s, err := n.Inst.Session(ctx, id)
		require.NoError(t, err)
		assert.JSONEq(t, string(config), string(s.Config), "%s's config", id)
	}
	d.Release()
	n.Idle()
}
