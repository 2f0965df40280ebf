package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
