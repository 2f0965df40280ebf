package sim

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A tree whose boots meet another connection's write lock (-bootlock) is
// judged on its wake-up's due time (checkWakeDue) but from a refusal
// until a sweep that began after it, in which storage refused nothing,
// ended: the sweeps' back-off on the storage schedule outlasts the lock.
// Until session 54 such trees were skipped for their whole life, which
// hid any late wake-up of theirs; skipping only while the lock was held
// reported that back-off (seeds gave 3 and 10 violations).
func TestWakeDueIsJudgedOnALockTreeOnceASweepRefusedNothing(t *testing.T) {
	tr := &tree{bootLock: &bootFaulter{left: 2}}
	assert.False(t, tr.wakeDueExcused(), "a lock tree whose storage refused nothing yet is not judged")

	tr.lock = &lockHolder{until: 5_000}
	assert.True(t, tr.wakeDueExcused(), "judged while another connection holds the lock")
	tr.busy = 3 // the guest's transactions it refused
	g := &guest{t: tr, sweepFaults: 1}
	tr.noteCleanSweep(g)
	assert.True(t, tr.wakeDueExcused(), "a sweep that met refusals made the tree judged")

	tr.lock = nil
	assert.True(t, tr.wakeDueExcused(), "judged right as the lock went, before its back-off ended")
	g.sweepFaults = 3 // a sweep began after the last refusal
	tr.busy = 4       // and met one
	tr.noteCleanSweep(g)
	assert.True(t, tr.wakeDueExcused(), "a sweep that met a refusal made the tree judged")

	g.sweepFaults = 4 // the next sweep refused nothing
	tr.lock = &lockHolder{until: 9_000}
	tr.noteCleanSweep(g)
	assert.True(t, tr.wakeDueExcused(), "judged while the lock is held, its sweep clean or not")
	tr.lock = nil
	tr.noteCleanSweep(g)
	assert.False(t, tr.wakeDueExcused(), "a sweep that refused nothing, with no lock, left the tree unjudged")

	tr.busy = 5
	assert.True(t, tr.wakeDueExcused(), "a refusal after the clean sweep made the tree judged")
}

// The same rule holds for a tree whose disk fails (-diskfull, -bootfault):
// judged outside its windows until a write fails, then again once a sweep
// that began after the failure met none.
func TestWakeDueIsJudgedOnADiskFaultTreeOutsideItsWindows(t *testing.T) {
	tr := &tree{now: 1_000}
	tr.newFault()
	tr.fault.FailBetween(2_000, 3_000, faultvfs.Full)
	assert.False(t, tr.wakeDueExcused(), "a tree whose disk failed nothing yet is not judged")

	tr.now = 2_500
	assert.True(t, tr.wakeDueExcused(), "judged within a window of its disk's")
	tr.now = 3_000
	assert.False(t, tr.wakeDueExcused(), "a window that failed no write left the tree unjudged")

	c, err := openConn(filepath.Join(t.TempDir(), "tree.db"), tr.vfs)
	require.NoError(t, err)
	t.Cleanup(func() { c.close() })
	tr.fault.FailNext(1, faultvfs.Full)
	require.NoError(t, c.Begin())
	_, err = c.Exec(`CREATE TABLE t (a)`, nil)
	if err == nil {
		err = c.Commit()
	}
	require.Error(t, err, "the disk failed no write")
	require.NoError(t, c.Rollback())
	assert.True(t, tr.wakeDueExcused(), "judged once a write failed")
	g := &guest{t: tr, sweepFaults: tr.diskFaults()}
	tr.noteCleanSweep(g)
	assert.False(t, tr.wakeDueExcused(), "a sweep that met no failure left the tree unjudged")
}
