package sim

import (
	"math/rand/v2"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// bootFaulter fails a tree's disk in the middle of a boot's sweep
// (Config.BootFault): right after the sweep's listing of the claims
// committed, before the recoveries write. A disk-full window (fillDisk)
// cannot open there, as it follows virtual time, which stands still within
// a boot, and one already open when a boot starts makes the instance
// read-only, where each write is tried once; so only this makes a boot's
// recovery wait for storage, on a guest timer no boot export fires (the
// guest cuts that wait and serves: wasm/guest bootResult).
type bootFaulter struct {
	rng  *rand.Rand // a generator of its own: it changes nothing else the tree draws
	left int        // faults still to arm
	n    int        // faults armed
}

// bootFaultFor is tree i's boot faulter, or nil if its boots never meet one.
func (c Config) bootFaultFor(i int) *bootFaulter {
	if c.BootFault == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(c.Seed^0xd6e8feb86659fd93, uint64(i)))
	if rng.Float64() >= c.BootFault {
		return nil
	}
	return &bootFaulter{rng: rng, left: 1 + rng.IntN(4)}
}

// maybeBootFault is the boot faulter at guest g's host call s, one the
// nemesis did not kill at. At the first COMMIT of the sweep of a boot (the
// listing), while the disk works and a session is claimed (so a recovery
// will write), it opens a window of 200 ms to 20 s in which every write
// fails, as a full disk or a failing device. A window shorter than the
// host's pause before it boots again (bootOnly) lets the next boot's sweep
// meet a fault of its own, as long as the tree has faults left. A boot
// that then fails, other than by a kill, is a failure of the run
// (bootOnly): the guest must serve, leaving the recovery to its wake-up.
func (t *tree) maybeBootFault(g *guest, s runtime.Site) {
	bf := t.bootFault
	if bf == nil || bf.left == 0 || !t.booting || g != t.cur || g.listed ||
		s.Phase != runtime.PhaseSweep || s.Import != abi.ImportSQLCommit || !s.After {
		return
	}
	g.listed = true
	if t.fault.Failing() {
		return
	}
	p := t.probeOf()
	if p == nil {
		return
	}
	claimed, err := p.Claimed()
	if err != nil {
		t.probeFailed("claimed", err)
		return
	}
	if len(claimed) == 0 {
		return
	}
	code := faultvfs.Full
	if bf.rng.IntN(3) == 0 {
		code = faultvfs.IOErrWrite
	}
	t.fault.FailBetween(t.now, t.now+200+int64(bf.rng.IntN(20_000)), code)
	g.faulted = true
	bf.left--
	bf.n++
}
