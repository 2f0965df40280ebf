package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A delete fault (-delfault) refuses the COMMIT of the delete's
// transaction on the disk itself, once per fault: the rows stay, and the
// faulter counts it. One that only counted would leave the campaigns'
// "delete commits refused" figure standing with no delete ever failing.
func TestDeleteFaultRefusesTheDeletesCommit(t *testing.T) {
	tt := treetest.New(t)
	n := tt.Boot(treetest.NewDriver(1))
	n.NewSession("s")
	n.Crash()

	tr := &tree{path: tt.Path, delFault: &deleteFaulter{rng: rand.New(rand.NewPCG(1, 2)), left: 1}}
	tr.newFault()
	c, err := openConn(tt.Path, tr.vfs)
	require.NoError(t, err)
	t.Cleanup(func() { c.close() })
	g := &guest{t: tr, boot: 1, conn: c}
	tr.cur = g

	deleteAll := func() error {
		require.NoError(t, c.Begin())
		_, err := c.Exec(`DELETE FROM sessions`, nil)
		require.NoError(t, err)
		if err := c.Commit(); err != nil {
			_ = c.Rollback()
			return err
		}
		return nil
	}
	require.True(t, tr.maybeFailDelete(g), "armed")
	require.Error(t, deleteAll(), "the delete's COMMIT went through")
	assert.Equal(t, 1, tr.fault.Failed())
	rows, err := c.Query(`SELECT COUNT(*) FROM sessions`, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), rows.Values[0][0], "the refused delete removed the session")
	assert.Equal(t, 1, tr.delFault.failed)

	assert.False(t, tr.maybeFailDelete(g), "a faulter with none left")
	require.NoError(t, deleteAll())
}

// The delete faulter fails the serving guest's delete only: a zombie's,
// or a superseded guest's, neither fails nor uses up the faults the
// tree has, which are for the delete its client is answered (its
// reopen is what -delfault reaches), and the report counts only those.
func TestDeleteFaultLeavesAZombiesDelete(t *testing.T) {
	tr := &tree{delFault: &deleteFaulter{rng: rand.New(rand.NewPCG(1, 2)), left: 1}}
	tr.newFault()
	t.Cleanup(func() { faultvfs.Unregister(tr.vfs) })
	cur := &guest{t: tr, boot: 2}
	tr.cur = cur
	for _, g := range []*guest{{t: tr, boot: 1}, {t: tr, boot: 2, zombie: true}} {
		assert.False(t, tr.maybeFailDelete(g), "boot %d, zombie %v", g.boot, g.zombie)
	}
	assert.Equal(t, 1, tr.delFault.left)
	assert.Zero(t, tr.delFault.failed)
	assert.False(t, tr.fault.Failing(), "a write of the tree's is set to fail")
}

// At a reopen's session listing (an epoch taken outside a boot, by a
// guest that took one before) the delete faulter takes the write lock for
// its draw and marks the guest; a boot's listing is left to the boot
// lock.
func TestDeleteFaultLocksAReopensListing(t *testing.T) {
	tt := treetest.New(t)
	n := tt.Boot(treetest.NewDriver(1))
	n.NewSession("s")
	n.Crash()

	tr := &tree{path: tt.Path, delFault: &deleteFaulter{rng: rand.New(rand.NewPCG(1, 2))}}
	t.Cleanup(tr.releaseLock)
	g := &guest{t: tr, boot: 1, epochs: 1}
	tr.cur = g
	begin := runtime.Site{Phase: runtime.PhaseSweep, Import: abi.ImportSQLBegin}
	for range 20 {
		g.tookEpoch = true
		if tr.maybeListingLock(g, begin); tr.lock != nil {
			break
		}
	}
	require.NotNil(t, tr.lock, "no reopen's listing met the lock in 20 draws")
	assert.True(t, g.reopenRefused)
	assert.Equal(t, 1, tr.delFault.listings)
	assert.Greater(t, tr.lock.until, tr.now)
	tr.releaseLock()

	reopens := tr.delFault.reopens
	tr.booting, g.tookEpoch = true, true
	tr.maybeListingLock(g, begin)
	assert.Equal(t, reopens, tr.delFault.reopens, "a boot's listing counted as a reopen's")
	assert.Nil(t, tr.lock)
	assert.Empty(t, tr.failures)
}

// A guest whose reopen met a refused listing and then reopens again with
// no DELETE sent to it in between left its instance closed: only a
// delete closes it. One with a DELETE between (which may fail after the
// close again) reopens rightly.
func TestReopenAgainWithoutADeleteIsAFailure(t *testing.T) {
	tr := &tree{del: &deleter{}}
	g := &guest{t: tr, boot: 3, reopenRefused: true}
	tr.noteSent(&request{a: action{kind: actDelete}}, g)
	tr.checkReopenServed(g)
	assert.Empty(t, tr.failures, "a reopen after a DELETE")

	g.reopenRefused = true
	tr.checkReopenServed(g)
	require.Len(t, tr.failures, 1)
	assert.Contains(t, tr.failures[0], "boot 3 reopened its instance again")
	tr.checkReopenServed(g)
	assert.Len(t, tr.failures, 1, "judged once per refused listing")
}

// Only a DELETE clears the mark of a reopen whose listing was refused:
// the tree's other requests (a prompt, a read) do not close the
// instance, so a reopen again after them still shows the refused one
// left it closed. A mark cleared at every request sent would let every
// such reopen pass, since its clients go on sending.
func TestARequestOtherThanADeleteKeepsTheReopenJudged(t *testing.T) {
	tr := &tree{del: &deleter{}}
	g := &guest{t: tr, boot: 3, reopenRefused: true}
	for _, kind := range []actionKind{actPrompt, actInterrupt} {
		tr.noteSent(&request{a: action{kind: kind}}, g)
	}
	tr.checkReopenServed(g)
	require.Len(t, tr.failures, 1)
	assert.Contains(t, tr.failures[0], "boot 3 reopened its instance again with no delete in between")
}

// The judgement runs where a reopen shows itself: an epoch taken outside
// a boot by a guest that took one before (noteEpoch). A boot's first
// epoch, or a reopen whose previous listing was served, is no failure.
func TestANewEpochOutsideABootJudgesTheReopen(t *testing.T) {
	tr := epochJudge(t)
	g := &guest{t: tr, boot: 2, epochs: 1}
	tr.noteEpoch(g)
	assert.Empty(t, tr.failures, "a reopen after a served listing")

	clear(tr.owners) // the same committed epoch reads as new again
	g.reopenRefused = true
	tr.booting = true
	tr.noteEpoch(g)
	assert.Empty(t, tr.failures, "a boot is no reopen")

	clear(tr.owners)
	tr.booting = false
	tr.noteEpoch(g)
	require.Len(t, tr.failures, 1)
	assert.Contains(t, tr.failures[0], "boot 2 reopened its instance again")
}

// A zombie credited with a new epoch after a newer boot took one took the
// tree back from that boot (checkEpochTaker, -reopenrace): a commit past
// the fence. A zombie's epoch while no newer boot took one (its successor
// booted read-only, core's late epoch) is none, nor is a serving guest's.
func TestAZombiesEpochOverANewerBootsIsPastTheFence(t *testing.T) {
	tr := epochJudge(t)
	older := int64(-1) // an epoch before the committed one
	zombie := &guest{t: tr, boot: 2, zombie: true}
	tr.owners[older] = 1
	tr.noteEpoch(zombie)
	assert.Empty(t, tr.ledger.ZombieCommits, "no boot newer than the zombie took an epoch")

	clear(tr.owners)
	tr.owners[older] = 3
	tr.noteEpoch(&guest{t: tr, boot: 2})
	assert.Empty(t, tr.ledger.ZombieCommits, "a serving guest's epoch")

	clear(tr.owners)
	tr.owners[older] = 3
	tr.noteEpoch(zombie)
	require.Len(t, tr.ledger.ZombieCommits, 1)
	assert.Equal(t, 2, tr.ledger.ZombieCommits[0].Boot)
	assert.Equal(t, 3, tr.ledger.ZombieCommits[0].Latest)
}

// -reopenrace races the reopens -delfault makes: without delete faults it
// would reach nothing, and is refused.
func TestReopenRaceNeedsDeleteFaults(t *testing.T) {
	cfg := DefaultConfig(1)
	cfg.Deletes, cfg.ReopenRace = 1, 0.5
	require.ErrorContains(t, cfg.Validate(), "-delfault")
	cfg.DeleteFault = 1
	require.NoError(t, cfg.Validate())
	cfg.ReopenRace = 2
	require.Error(t, cfg.Validate())
}

// epochJudge is a tree whose epochs noteEpoch judges: one session,
// written by an instance that then crashed, so its epoch is committed.
func epochJudge(t *testing.T) *tree {
	tt := treetest.New(t)
	n := tt.Boot(treetest.NewDriver(1))
	n.NewSession("s")
	n.Crash()

	tr := &tree{path: tt.Path, owners: map[int64]int{}}
	t.Cleanup(func() {
		if tr.obs != nil {
			tr.obs.Close()
		}
	})
	return tr
}
