package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An `always` reply to a request about several resources saves one rule
// for each, under ids of their own: the reply commits, the call runs, and
// every resource is allowed from then on.
func TestPermissionAlwaysSavesARuleForEachResource(t *testing.T) {
	c := newPermRun(t, false)
	c.d.resolve = func(target string) []string { return []string{"target:" + target, "db:" + target} }
	n, pid, asked := c.parked(t, "deploy staging", 1)
	_, err := n.Inst.Reply(ctx, c.sid, asked[0].ID, permReply("r1", core.ReplyAlways, ""))
	require.NoError(t, err)
	n.Idle()

	saved := treetest.OfType(c.tr.Events(c.sid), event.PermissionRuleSaved)
	require.Len(t, saved, 2)
	ids, resources := map[string]bool{}, []string{}
	for _, ev := range saved {
		var r event.RuleSaved
		require.NoError(t, ev.Decode(&r))
		ids[r.RuleID] = true
		resources = append(resources, r.Resource)
	}
	assert.Len(t, ids, 2, "each rule has its own id")
	assert.ElementsMatch(t, []string{"target:staging", "db:staging"}, resources)
	assert.Equal(t, 1, c.l.count("deploy"))
	assert.Equal(t, "succeeded", c.tr.PromptState(pid))
}
