package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A boot fault opens right after the sweep's listing committed (its
// COMMIT's After site), and only when a session is claimed: a recovery
// will then write into it, which is what the fault is for (the boot must
// cut that write's wait and serve). A fault over a tree with no claim, or
// one that the listing's own commit met, would test nothing of that.
func TestBootFaultOpensAfterTheListingOverAClaim(t *testing.T) {
	for name, claimed := range map[string]bool{"claimed": true, "no claim": false} {
		t.Run(name, func(t *testing.T) {
			tt := treetest.New(t)
			d := treetest.NewDriver(4)
			n := tt.Boot(d)
			if claimed {
				sid := n.NewSession("s")
				n.Admit(sid, "hold")
				<-d.Started
			}
			n.Crash()

			tr := &tree{path: tt.Path, booting: true, bootFault: &bootFaulter{rng: rand.New(rand.NewPCG(1, 2)), left: 2}}
			tr.newFault()
			t.Cleanup(tr.closeProbe)
			g := &guest{t: tr, boot: 1}
			tr.cur = g

			site := runtime.Site{Phase: runtime.PhaseSweep, Import: abi.ImportSQLCommit}
			tr.maybeBootFault(g, site) // the listing's COMMIT, not yet made
			require.False(t, g.listed, "before the listing's commit")
			require.False(t, tr.fault.Failing())

			site.After = true
			tr.maybeBootFault(g, site)
			assert.True(t, g.listed)
			assert.Equal(t, claimed, tr.fault.Failing(), "the disk fails writes")
			assert.Equal(t, claimed, g.faulted != nil, "the boot is marked as one that met a fault")
			armed := 0
			if claimed {
				armed = 1
			}
			assert.Equal(t, armed, tr.bootFault.n)
			assert.Empty(t, tr.notes, "the probe read the claims")
		})
	}
}
