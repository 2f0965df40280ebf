package sim_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
)

// A small campaign with -delfault and -flood reaches what they are for:
// delete commits refused after the close and the reopens after them, and
// flooded answers delivered; and the real guest keeps every rule there.
// Without it only the faulters' pieces are tested, and a faulter no
// longer called from the campaign (beforeCommit, send) would leave every
// -delfault or -flood campaign reporting zeros, passing.
func TestDeleteFaultAndFloodCampaignsReachTheirPaths(t *testing.T) {
	wasm := guestbuild.Must(t)
	cfg := sim.Config{Seed: 3, Sessions: 4, Kills: 20, Scripted: 1, Flood: 0.5, Deletes: 1, DeleteFault: 1, CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	var faults, reopens, floods int
	for _, s := range res.Sessions {
		faults += s.DeleteFaults
		reopens += s.DeleteReopens
		floods += s.Floods
	}
	assert.Positive(t, faults, "delete commits refused after the close")
	assert.Positive(t, reopens, "reopens after a refused delete")
	assert.Positive(t, floods, "flooded answers delivered")
}
