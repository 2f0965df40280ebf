package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An outage longer than the write schedule's window but within the
// settlement window: the execution told to stop records the interrupt on
// the settlement schedule (the user's interrupt is what must land), so the
// record lands once storage returns and the tree does not turn read-only.
// (TestALateRecordThatNeverLandsLeavesTheTurnToBeResumed is the outage
// that outlasts both.)
func TestALateRecordWaitsOutAnOutagePastTheWriteWindow(t *testing.T) {
	tr, _, _, n, sid, running, queued := turnMeetsAnOutage(t, retry.WriteWindow+time.Minute)
	tr.Drive(func() {
		_, _ = n.Inst.Interrupt(ctx, sid, event.ReasonUser) // may answer 503: the record is the execution's
		n.Idle()
	})
	require.False(t, n.Inst.ReadOnly(), "the record waited out the outage on the settlement schedule")
	assert.Equal(t, "interrupted", tr.PromptState(running))
	assert.Equal(t, "cancelled", tr.PromptState(queued))
	assert.False(t, tr.Claim(sid).Exists)
}

// turnMeetsAnOutage is a session whose turn runs (held by the driver) with
// a prompt queued behind it when the disk starts refusing writes for d.
func turnMeetsAnOutage(t *testing.T, d time.Duration) (tr *treetest.Tree, f *faultvfs.Fault, drv *treetest.Driver, n *treetest.Node, sid, running, queued string) {
	t.Helper()
	tr, f, drv, n = faultTree(t, 4)
	sid = n.NewSession("s")
	running = n.Admit(sid, "hold")
	<-drv.Started
	queued = n.Admit(sid, "queued before the interrupt")
	f.FailFor(d, faultvfs.Full)
	return tr, f, drv, n, sid, running, queued
}
