package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/runtime"
)

// A guest superseded by a newer boot over the same database (a zombie, as
// a second process that took the tree over leaves it) must not delete the
// tree under the instance that owns it: the delete's transaction checks
// the epoch, as every write of core does, and refuses with a 503 (retried,
// the request reaches the live guest). The tree stays whole for B, and A,
// closed by its delete, neither arms a wake-up to reopen it nor reopens
// for one delivered (that reopen would take the tree back from B). A used
// to answer 204 and empty the tree.
func TestASupersededGuestsDeleteIsFenced(t *testing.T) {
	a := newEnv(t, 8, offlineConfig())
	require.NoError(t, a.boot(runtime.Options{}))
	a.createAndPrompt("one two three")
	a.fireTimers(10 * 60_000)
	require.Equal(t, "idle", a.snapshot().Status)
	a.s.wake = 0 // whatever A armed was delivered: used up

	b := a.sibling(108)
	require.NoError(t, b.boot(runtime.Options{}), "B takes the tree over: a new epoch")

	r := a.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 503, r.status, r.body.String())
	require.Contains(t, r.body.String(), `"unavailable"`)
	require.Zero(t, a.s.wake, "the superseded guest arms no reopening")
	// Nor does a wake-up delivered to it reopen it (a new epoch, which
	// would fence B).
	require.NoError(t, a.g.Wake(context.Background()))

	r = b.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 200, r.status, r.body.String())
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, b.terminals(), "the tree's log is whole")
	r = b.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "after the zombie's delete", "id": "p2"})
	require.Equal(t, 202, r.status, r.body.String())

	// The live guest deletes it.
	r = b.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 204, r.status, r.body.String())
	r = b.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
}
