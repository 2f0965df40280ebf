package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
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
	// race draws which reopens a successor boots within
	// (Config.ReopenRace, maybeRaceReopen; nil: none), raceShare is the
	// share, raced counts them.
	race      *rand.Rand
	raceShare float64
	raced     int
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
	df := &deleteFaulter{rng: rng, left: 1 + rng.IntN(3)}
	if c.ReopenRace > 0 {
		df.race, df.raceShare = stream(c.Seed, keyReopenRace, i), c.ReopenRace
	}
	return df
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
	g.reopenDue = true
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

// drawReopenRace runs as the wake-up is delivered to the serving guest g
// (deliverWake): if the delete faulter failed g's delete after the close,
// the wake handler reopens the closed instance, and the share
// Config.ReopenRace of those reopens is raced, at its first or second
// BEGIN (maybeRaceReopen), both before the reopen takes its epoch (the
// schema's transaction, then the epoch's).
func (t *tree) drawReopenRace(g *guest) {
	df := t.delFault
	if df == nil || df.race == nil || !g.reopenDue {
		return
	}
	if df.race.Float64() < df.raceShare {
		g.raceAt, g.raceBegins = 1+df.race.IntN(2), 0
	}
}

// maybeRaceReopen is the nemesis at the BEGIN drawn for a reopen of the
// serving guest g (drawReopenRace): it abandons g right there, a zombie
// in the middle of its wake handler, and boots its successor within that
// call, as a second host that took the tree over while the old one's
// wake-up reopened it would. The reopen goes on in the zombie and must
// find the tree taken (core.Reopen checks the closed instance's ownership
// in the epoch's own transaction): one that takes a new epoch all the same
// takes the tree from its successor, which checkEpochTaker reports. As in
// maybeSupersede, a boot within a call must not wait for storage, so the
// race is run only while the disk fails nothing and no other connection
// holds the lock, and not in trees whose boots the boot faulters fail.
func (t *tree) maybeRaceReopen(g *guest, s runtime.Site) bool {
	if g.raceAt == 0 || s.Import != abi.ImportSQLBegin || s.After {
		return false
	}
	g.raceBegins++
	if g.raceBegins != g.raceAt {
		return false
	}
	g.raceAt = 0
	if g != t.cur || g.conn.InTx() || t.lock != nil || t.fault != nil && t.fault.Failing() || t.bootFault != nil || t.bootLock != nil {
		return false
	}
	t.abandon(g)
	t.delFault.raced++
	t.bootOnly(t.ctx)
	return true
}

// checkEpochTaker runs as guest g is credited with a new epoch (noteEpoch):
// a zombie that takes one after a newer boot took one took the tree back
// from that boot, whose writes its epoch now fences (a reopen that checked
// the closed instance's ownership apart from its epoch's transaction did,
// in session 57's review). core never lets a superseded instance take an
// epoch: a read-only one takes its late epoch only while none was taken
// since its boot (ensureEpoch), a reopen only while the closed instance
// still owns the tree (core.Reopen). It is a zombie's commit past the
// fence (check.RuleZombie).
func (t *tree) checkEpochTaker(g *guest, epoch int64) {
	if !g.zombie {
		return
	}
	newest := 0
	for _, b := range t.owners {
		newest = max(newest, b)
	}
	if newest > g.boot {
		t.ledger.ZombieCommits = append(t.ledger.ZombieCommits, check.ZombieCommit{At: t.now, Boot: g.boot, Latest: newest,
			What: fmt.Sprintf("took epoch %d over boot %d's", epoch, newest)})
	}
}
