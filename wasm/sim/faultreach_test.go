package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
)

// A small campaign with -delfault and -flood reaches what they are for:
// delete commits refused after the close and the reopens after them, and
// flooded answers delivered, as its report says; and the real guest
// keeps every rule there.
// Without it only the faulters' pieces are tested, and a faulter no
// longer called from the campaign (beforeCommit, send) would leave every
// -delfault or -flood campaign reporting zeros, passing.
func TestDeleteFaultAndFloodCampaignsReachTheirPaths(t *testing.T) {
	wasm := guestbuild.Must(t)
	cfg := sim.Config{Seed: 3, Sessions: 4, Kills: 20, Scripted: 1, Flood: 0.5, Deletes: 1, DeleteFault: 1, CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	assert.Empty(t, res.Violations)
	var faults, trees, reopens, listings, floods, behind int
	for _, s := range res.Sessions {
		faults += s.DeleteFaults
		if s.DeleteFaults > 0 {
			trees++
		}
		reopens += s.DeleteReopens
		listings += s.DeleteReopenListings
		floods += s.Floods
		behind += s.FellBehind
	}
	assert.Positive(t, faults, "delete commits refused after the close")
	assert.Positive(t, reopens, "reopens after a refused delete")
	assert.Positive(t, floods, "flooded answers delivered")
	var out bytes.Buffer
	res.Print(&out)
	assert.Contains(t, out.String(), fmt.Sprintf("delete faults (share 1.00 of the deleted trees): %d delete commits refused after the close, in %d trees; reopens after them %d, of those session listings refused %d\n", faults, trees, reopens, listings))
	assert.Contains(t, out.String(), fmt.Sprintf("floods (share 0.50 of the scripted prompts): %d answers streamed in 1100 events in one call, of those whose watch fell behind (fewer live deltas emitted) %d\n", floods, behind))
}
