package recovery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// 12a. A wake that fires between arming and a claim's commit: the handler's
// sweep finds nothing, the wake-up is used up, and the claim commits a moment
// later. The handler's last act (re-arm under the claim lock) must leave the
// claim with a wake-up (DESIGN §4 rules 1–2; §15 "wake-up used up early").
func TestWakeBetweenArmAndClaimCommitEndsRearmed(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	tr.Wake.Take()

	handlerDone := make(chan struct{})
	tr.Wake.OnArm(func(int64) {
		tr.Wake.OnArm(nil)
		// The wake-up is delivered right after being armed, before the claim
		// commits: it is used up, and the handler's sweep sees no claim.
		require.True(t, tr.Wake.Take())
		rep, err := recovery.Sweep(ctx, n.Inst)
		require.NoError(t, err)
		assert.Empty(t, rep.Decisions, "the claim is not committed yet")
		go func() {
			defer close(handlerDone)
			_, err := n.Inst.Rearm(ctx) // the handler's last act waits for the claim lock
			assert.NoError(t, err)
		}()
	})
	n.Admit(sid, "hold")
	<-d.Started
	<-handlerDone
	n.Crash() // the turn dies: only the wake-up can bring it back

	require.True(t, tr.Claim(sid).Exists)
	assert.NotZero(t, tr.Wake.At(), "the claim has a wake-up")

	// Delivering it boots a fresh instance that runs the turn.
	require.True(t, tr.Wake.Take())
	d.Release()
	n2 := tr.Boot(d)
	n2.Idle()
	assert.Len(t, treetest.Terminals(tr.Events(sid)), 1)
}

// 12a'. The same wake delivered while the claim's write waits for storage
// (a zombie holds the write lock): the wait lets go of the claim lock, so
// the whole handler, its re-arm too, runs and finds no claim. The rerun
// that commits the claim must arm the wake-up again, as the first attempt
// did (plants57 P12: arming before the first attempt only went unnoticed
// by core's and recovery's tests: none delivered a wake-up during a
// claiming write's wait).
func TestWakeDuringAClaimsWaitForStorageEndsRearmed(t *testing.T) {
	tr := treetest.New(t)
	tr.DB.BusyTimeout = 20 * time.Millisecond
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	tr.Wake.Take()

	release := tr.HoldWriteLock()
	delivered := false
	waits := tr.DriveEach(func() { n.Admit(sid, "hold") }, func(retry.Wait) {
		if delivered {
			return
		}
		delivered = true
		release() // the rerun waits for the clock, which moves on after this
		require.True(t, tr.Wake.Take(), "the claiming write armed the wake-up before its first attempt")
		rep, err := recovery.Wake(ctx, n.Inst)
		require.NoError(t, err)
		assert.Empty(t, rep.Decisions, "the claim is not committed yet")
		assert.Zero(t, tr.Wake.At(), "with no claim stored, the handler armed nothing")
	})
	require.NotEmpty(t, waits, "the admission waited for the write lock")
	<-d.Started
	n.Crash() // the turn dies: only the wake-up can bring it back

	require.True(t, tr.Claim(sid).Exists)
	assert.NotZero(t, tr.Wake.At(), "the claim has a wake-up")
}

// 12b. A wake that fires while the turn runs here: the sweep skips the
// session, and the handler re-arms before returning, so a kill right after
// still leaves the claim with a wake-up (§15 "wake-up used up during a turn").
func TestWakeDuringRunningTurnEndsRearmed(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started

	require.True(t, tr.Wake.Take(), "admission armed the wake-up")
	rep, err := recovery.Wake(ctx, n.Inst)
	require.NoError(t, err)
	assert.Empty(t, rep.Decisions, "the running session is skipped")
	n.Crash()

	assert.True(t, tr.Claim(sid).Exists)
	require.NotZero(t, tr.Wake.At(), "the handler re-armed as its last act")
	assert.LessOrEqual(t, tr.Wake.At(), tr.Clock.Now()+core.DefaultWakeInterval.Milliseconds())
}

// 12c. Boot re-arms from durable state (rule 3), even when the wake-up was
// lost with the old instance.
func TestBootRearmsFromDurableState(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()
	tr.Wake.Take() // the wake-up is gone

	n2 := tr.Boot(d) // resumes, and arms while the claim exists
	<-d.Started
	assert.NotZero(t, tr.Wake.At())
	assert.True(t, tr.Claim(sid).Exists)
	n2.Crash()

	// With no claim left, a wake handler arms nothing.
	d.Release()
	n3 := tr.Boot(d)
	n3.Idle()
	tr.Wake.Take()
	_, err := recovery.Wake(ctx, n3.Inst)
	require.NoError(t, err)
	assert.Zero(t, tr.Wake.At())
}
