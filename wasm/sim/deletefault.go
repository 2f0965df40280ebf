package sim

import (
	"math/rand/v2"

	"github.com/revenantrt/revenant/internal/faultvfs"
)

// deleteFaulter makes a deleted tree's delete fail after it closed the
// instance (Config.DeleteFault): the disk refuses the COMMIT of the
// delete's transaction (one write, SQLITE_FULL or an IOERR), 1 to 3 times
// in the tree's life. The guest's delete then answers 5xx, the tree stays,
// and the wake-up it arms runs the reopen (wasm/guest reopen): the wake
// handler boots the closed instance again, a new epoch, then its session
// listing and the sweep. At that listing, half the time, another
// connection takes the tree's write lock for 200 ms to 5 s, as
// maybeListingLock does at a boot's: the listing is refused, and so is
// the sweep; the reopen must serve all the same (checkReopenServed).
// Without it no delete fails after the close but by a disk-full window or
// a boot lock that happen to be open then, and a reopen's refused listing
// was never reached (session 54's campaigns).
type deleteFaulter struct {
	rng  *rand.Rand // a generator of its own: it changes nothing else the tree draws
	left int        // delete commits still to fail
	// failed counts the delete commits it failed, reopens the reopens
	// that followed (an epoch taken in a wake handler), listings those
	// whose session listing it refused with the lock.
	failed, reopens, listings int
}

// deleteFaultFor is tree i's delete faulter, or nil if its delete never
// fails so: a tree its client never deletes has none.
func (c Config) deleteFaultFor(i int, del *deleter) *deleteFaulter {
	if c.DeleteFault == 0 || del == nil {
		return nil
	}
	rng := stream(c.Seed, keyDelFault, i)
	if rng.Float64() >= c.DeleteFault {
		return nil
	}
	return &deleteFaulter{rng: rng, left: 1 + rng.IntN(3)}
}

// maybeFailDelete runs once the delete's transaction is seen about to
// commit (beforeCommit): the serving guest's delete has closed its
// instance by then. It reports whether it made the COMMIT fail.
func (t *tree) maybeFailDelete(g *guest) bool {
	df := t.delFault
	if df == nil || df.left == 0 || g != t.cur || g.zombie {
		return false
	}
	code := faultvfs.Full
	if df.rng.IntN(3) == 0 {
		code = faultvfs.IOErrWrite
	}
	t.fault.FailNext(1, code)
	df.left--
	df.failed++
	return true
}

// maybeReopenLock is the delete faulter at the session listing of guest
// g's reopen (maybeListingLock calls it there). It reports whether it
// took the write lock.
func (t *tree) maybeReopenLock(g *guest) bool {
	df := t.delFault
	if df == nil {
		return false
	}
	df.reopens++
	if g != t.cur || g.zombie || t.lock != nil || t.fault != nil && t.fault.Failing() || df.rng.IntN(2) != 0 {
		return false
	}
	if err := t.holdLock(t.now + 200 + int64(df.rng.IntN(4_800))); err != nil {
		t.failf("boot %d: take the write lock on another connection at the reopen's session listing: %v", g.boot, err)
		return false
	}
	df.listings++
	g.reopenRefused = true
	return true
}

// checkReopenServed runs as guest g takes an epoch in a reopen: one whose
// previous reopen's session listing was refused (maybeReopenLock), with
// no DELETE sent to it since (only a delete closes the instance), shows
// that reopen left the instance closed: it failed where it must serve
// (wasm/guest reopen), and every request to the tree failed 503 until
// this wake-up on the back-off schedule.
func (t *tree) checkReopenServed(g *guest) {
	if g.reopenRefused {
		t.failf("boot %d reopened its instance again with no delete in between: its reopen whose session listing was refused left it closed", g.boot)
	}
	g.reopenRefused = false
}
