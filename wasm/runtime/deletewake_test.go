package runtime_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A delete of a tree whose turn is streaming a model answer through the
// host's egress is answered within the call that delivered the DELETE:
// its close cancels the egress (a synchronous import), the turn records
// interrupted{shutdown} (core's storage waits end at once on a closing
// instance), and the guest settles before the export returns. So no
// wake-up can reach the guest while the delete runs (exports are never
// re-entered), and the wake-up handler's skip of a running delete
// (wasm/guest main.go wake, `deleting`) guards a state this guest never
// shows its host: a planted bug that drops it is not seen here. This
// test pins that premise: should a delete ever wait across host calls,
// the DELETE below goes unanswered, and the guard needs a test that
// delivers the wake-up in that window (a reopen there took a new epoch
// under the delete, whose fence then refused it: 503, the tree kept and
// no instance serving it).
//
// The wake-up the turn armed may still come (a host's alarm can fire
// as the clear lands): it finds the tree gone, takes no epoch and arms
// nothing.
func TestADeleteDuringAModelStreamIsAnsweredWithinItsCall(t *testing.T) {
	e, id := promptedModelCall(t)
	ctx := context.Background()
	require.NoError(t, e.g.EgressResponse(ctx, id, 200, http.Header{"Content-Type": {"text/event-stream"}}))
	require.NoError(t, e.g.EgressChunk(ctx, id, []byte("data: {\"choices\":[{\"delta\":{\"content\":\"Once upon\"}}]}\n\n")))
	require.Equal(t, "busy", e.snapshot().Status, "the turn's model step is in flight")
	require.NotZero(t, e.s.wake, "the turn armed a wake-up")
	epoch := e.epoch()

	e.next++
	del := e.next
	require.NoError(t, e.g.Request(ctx, del, runtime.Request{Method: "DELETE", Path: "/v1/sessions/" + treeID}))
	r := e.s.responses[del]
	require.NotNil(t, r, "the DELETE waits across host calls: a wake-up can now come while it runs")
	require.Equal(t, 204, r.status, r.body.String())
	require.True(t, r.ended)
	require.Equal(t, []uint64{id}, e.s.cancelled, "the delete's close cancelled the model step")
	require.Zero(t, e.s.wake, "the deleted tree's wake-up is cleared")
	clears := e.s.clears

	require.NoError(t, e.g.Wake(ctx))
	require.Equal(t, epoch, e.epoch(), "no epoch was taken: nothing reopened the tree")
	require.Zero(t, e.s.wake, "nothing is armed for the deleted tree")
	require.Equal(t, clears, e.s.clears)
	r = e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
}

// epoch is the tree's stored epoch: each boot, and each reopen, takes the
// next one.
func (e *env) epoch() int64 {
	e.t.Helper()
	var epoch int64
	found := false
	err := e.db.Tx(context.Background(), func(tx storage.Tx) (err error) {
		found, err = storage.QueryRow(tx, `SELECT epoch FROM tree`, nil, &epoch)
		return err
	})
	require.NoError(e.t, err)
	require.True(e.t, found, "the tree's epoch row")
	return epoch
}
