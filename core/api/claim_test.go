package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
)

// While a turn sleeps on a provider retry, the snapshot's claim says until
// when (retry_at); once the turn ends, the session has no claim.
func TestSnapshotClaimShowsTheRetry(t *testing.T) {
	var retryAt atomic.Int64
	sleep := core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		at := x.Clock().Now() + 60_000
		retryAt.Store(at)
		return core.Outcome{Kind: core.RetryLater, RetryAt: at, Attempt: 1, Message: "the model is busy"}
	})
	f := newFixture(t, sleep, nil)
	c := f.client(t, "")
	id := c.create()
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hello"}`, nil))
	f.trees.tree(id).node.Idle()

	var snap struct {
		Status string
		Claim  *struct {
			ExecutionID string `json:"execution_id"`
			ClaimedAt   int64  `json:"claimed_at"`
			RetryAt     int64  `json:"retry_at"`
		}
	}
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &snap))
	require.NotNil(t, snap.Claim, "the turn sleeps; it is not over")
	assert.Equal(t, "busy", snap.Status)
	assert.Equal(t, retryAt.Load(), snap.Claim.RetryAt)
	assert.NotEmpty(t, snap.Claim.ExecutionID, "the claim keeps its execution while it sleeps")
	assert.NotZero(t, snap.Claim.ClaimedAt)

	require.Equal(t, http.StatusOK, c.do("POST", "/v1/sessions/"+id+"/interrupt", "", nil))
	snap.Claim = nil
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &snap))
	assert.Nil(t, snap.Claim)
	assert.Equal(t, "idle", snap.Status)
}
