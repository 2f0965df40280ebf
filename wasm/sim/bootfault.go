package sim

import (
	"errors"
	"math/rand/v2"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// bootFaulter makes storage refuse a tree's writes in the middle of a
// boot's sweep: right after the sweep's listing of the claims committed,
// before the recoveries write. Its disk fails (Config.BootFault), or
// another connection takes the write lock (Config.BootLock). A disk-full
// window (fillDisk) cannot open there, as it follows virtual time, which
// stands still within a boot, and one already open when a boot starts
// makes the instance read-only, where each write is tried once; so only
// this makes a boot's recovery wait for storage, on a guest timer no boot
// export fires (the guest cuts that wait and serves: wasm/guest
// bootResult).
type bootFaulter struct {
	rng  *rand.Rand // a generator of its own: it changes nothing else the tree draws
	left int        // faults still to arm
	n    int        // faults armed
	// served counts the boots that met one of its faults and served.
	served int
	// listings counts the faults of n opened at a session listing
	// (maybeListingLock), listingsServed the boots among served that met
	// one there, reopens those opened at a reopen's listing.
	listings, listingsServed, reopens int
	// wakeDueJudged counts the wake-up due times judged once it opened a
	// window (checkWakeDue).
	wakeDueJudged int
}

// bootFaultFor is tree i's disk faulter within boots, or nil if its boots
// never meet one.
func (c Config) bootFaultFor(i int) *bootFaulter {
	return newBootFaulter(c.BootFault, c.Seed^keyBootFault, i)
}

// bootLockFor is tree i's write-lock faulter within boots, or nil if its
// boots never meet one. Its generator is apart from the disk faulter's,
// so with -bootlock off every seed's history is as it was.
func (c Config) bootLockFor(i int) *bootFaulter {
	return newBootFaulter(c.BootLock, c.Seed^keyBootLock, i)
}

func newBootFaulter(share float64, seed uint64, i int) *bootFaulter {
	if share == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	if rng.Float64() >= share {
		return nil
	}
	return &bootFaulter{rng: rng, left: 1 + rng.IntN(4)}
}

func (bf *bootFaulter) armed() bool { return bf != nil && bf.left > 0 }

// window is how long a fault lasts: 200 ms to 20 s of virtual time.
func (bf *bootFaulter) window() int64 { return 200 + int64(bf.rng.IntN(20_000)) }

// maybeBootFault is the boot faulters at guest g's host call s, one the
// nemesis did not kill at. At the first COMMIT of the sweep of a boot (the
// listing), while storage takes writes and a session is claimed (so a
// recovery will write), it opens a window of 200 ms to 20 s in which
// every write fails, as a full disk or a failing device, or, for a tree
// whose disk faulter has none left, in which another connection holds the
// tree's write lock (a backup, an operator's sqlite3: every transaction of
// the guest's, which begins as a write, is refused SQLITE_BUSY, its busy
// timeout spent). A window shorter than the host's pause before it boots
// again (bootOnly) lets the next boot's sweep meet a fault of its own, as
// long as the tree has faults left. A boot that then fails, other than by
// a kill, is a failure of the run (bootOnly): the guest must serve,
// leaving the recovery to its wake-up.
func (t *tree) maybeBootFault(g *guest, s runtime.Site) {
	if !t.bootFault.armed() && !t.bootLock.armed() || !t.booting || g != t.cur || g.listed ||
		s.Phase != runtime.PhaseSweep || s.Import != abi.ImportSQLCommit || !s.After {
		return
	}
	g.listed = true
	if t.fault != nil && t.fault.Failing() || t.lock != nil {
		return
	}
	if !t.someClaimed() {
		return
	}
	if bf := t.bootFault; bf.armed() {
		code := faultvfs.Full
		if bf.rng.IntN(3) == 0 {
			code = faultvfs.IOErrWrite
		}
		t.fault.FailBetween(t.now, t.now+bf.window(), code)
		g.faulted = bf
		bf.left--
		bf.n++
		return
	}
	bf := t.bootLock
	if err := t.holdLock(t.now + bf.window()); err != nil {
		t.failf("boot %d: take the write lock on another connection: %v", g.boot, err)
		return
	}
	g.faulted = bf
	bf.left--
	bf.n++
}

// someClaimed reports whether a session of t is claimed, as the probe
// reads it: the boot faulters fault only a boot with work to recover. No
// probe, or one that failed (probeFailed has said so), is false.
func (t *tree) someClaimed() bool {
	p := t.probeOf()
	if p == nil {
		return false
	}
	claimed, err := p.Claimed()
	if err != nil {
		t.probeFailed("claimed", err)
		return false
	}
	return len(claimed) > 0
}

// maybeListingLock is the boot-lock faulter at guest g's host call s
// (after maybeBootFault). At the first BEGIN after a COMMIT of g's that
// took a new epoch, which is the session listing of a boot (core.Open,
// then wasm/guest opened) or of a reopen (the wake handler booting again
// an instance a failed delete closed), while storage takes writes and a
// session is claimed, it draws whether to take the write lock there, for
// a window as maybeBootFault's: the listing is refused, and so is the
// sweep after it. The guest must serve all the same and watch each session
// from its next committed event (wasm/guest watchListed); a boot that
// fails there is a failure of the run (checkBootServed). The other draw
// leaves the fault to the sweep's listing (maybeBootFault). A reopen's
// listing goes to the delete faulter first (maybeReopenLock), when the
// tree has one: the boot lock draws there only if that took no lock.
func (t *tree) maybeListingLock(g *guest, s runtime.Site) {
	if !g.tookEpoch || s.Import != abi.ImportSQLBegin || s.After {
		return
	}
	g.tookEpoch = false
	if !t.booting && t.maybeReopenLock(g) {
		return
	}
	bf := t.bootLock
	if !bf.armed() || t.bootFault.armed() || g != t.cur || g.zombie || t.lock != nil || t.fault != nil && t.fault.Failing() {
		return
	}
	if !t.someClaimed() || bf.rng.IntN(2) != 0 {
		return
	}
	if err := t.holdLock(t.now + bf.window()); err != nil {
		t.failf("boot %d: take the write lock on another connection at the session listing: %v", g.boot, err)
		return
	}
	bf.left--
	bf.n++
	bf.listings++
	if !t.booting {
		bf.reopens++
		return
	}
	g.faulted, g.atListing = bf, true
}

// lockHolder is another connection to a tree's file holding its write
// lock until a time of virtual time (maybeBootFault).
type lockHolder struct {
	db    *sqlitedb.DB
	conn  *sqlitedb.Conn // in its transaction
	until int64
}

// holdLock has another connection take the tree's write lock (BEGIN
// IMMEDIATE, writing nothing) until virtual time until: the run lets go
// of it then (releaseLock, a step of its own), or as a failed boot's
// pause passes it (bootOnly).
func (t *tree) holdLock(until int64) error {
	db, err := sqlitedb.Open(t.path, sqlitedb.Options{NoSync: true, BusyTimeout: -1})
	if err != nil {
		return err
	}
	c := db.Conn()
	if err := c.Begin(); err != nil {
		return errors.Join(err, db.Close())
	}
	t.lock = &lockHolder{db: db, conn: c, until: until}
	t.tracef("another connection takes the write lock until %s", traceAt(until))
	return nil
}

// releaseLock lets go of the write lock another connection holds, if any.
func (t *tree) releaseLock() {
	l := t.lock
	if l == nil {
		return
	}
	t.lock = nil
	t.tracef("another connection lets go of the write lock")
	if err := errors.Join(l.conn.Rollback(), l.db.Close()); err != nil {
		t.failf("let go of the write lock another connection held: %v", err)
	}
}

// releaseDueLock lets go of the write lock once virtual time reached the
// end of its window.
func (t *tree) releaseDueLock() {
	if t.lock != nil && t.now >= t.lock.until {
		t.releaseLock()
	}
}
