package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// The wake schedule holds from the first failed delivery on: an arm
// outside a delivery that asks for an earlier time than the retry (here
// a millisecond ahead, earlier than the first retry's second) leaves the
// retry where it is, after one failed delivery as after several
// (TestArmsOutsideFailedDeliveriesKeepTheWakeSchedule arms later than
// the first retry, so only the later ones are tested there).
func TestArmAfterTheFirstFailedDeliveryKeepsItsRetry(t *testing.T) {
	e := newEnv(t)
	vfs := "host-rearm-first-retry"
	fault := e.faultVFS(t, vfs)
	h, tree, arm := e.guestTreeWithClaim(t, host.WithVFS(e.config(), vfs))
	tree.setOnWake(func() { _ = arm(e.clock.Now() + 1000) }) // the sweep's re-arm, refused
	require.NoError(t, arm(e.clock.Now()+1000))
	fault.FailFor(time.Hour, faultvfs.Full)

	for failed := 1; failed <= 3; failed++ {
		e.clock.Set(h.WakeTimerAt("t1"))
		require.Error(t, e.nextDelivery().err, "delivery %d: its re-arm cannot store the row", failed)
		want := e.clock.Now() + retry.Wake().Delay(failed-1).Milliseconds()
		require.NoError(t, arm(e.clock.Now()+1), "the kept row covers the arm")
		require.Equal(t, want, h.WakeTimerAt("t1"), "the retry after %d failed deliveries and an earlier arm", failed)
	}
	fault.Heal()
	require.NoError(t, h.Close(ctx))
}

// In a delivery that retries a failed one, the handler's arms set the
// timer as in any delivery: the earliest of them fires it, though the
// run of failures ends only with this delivery's success.
func TestArmsInARetriedDeliverySetTheTimerAtTheEarliest(t *testing.T) {
	e := newEnv(t)
	vfs := "host-rearm-retried-delivery"
	fault := e.faultVFS(t, vfs)
	h, tree, arm := e.guestTreeWithClaim(t, host.WithVFS(e.config(), vfs))
	tree.setOnWake(func() { _ = arm(e.clock.Now() + 1000) }) // refused below
	require.NoError(t, arm(e.clock.Now()+1000))
	fault.FailFor(time.Hour, faultvfs.Full)
	e.clock.Set(h.WakeTimerAt("t1"))
	require.Error(t, e.nextDelivery().err, "its re-arm cannot store the row")

	fault.Heal()
	var earliest int64
	tree.setOnWake(func() {
		now := e.clock.Now()
		assert.NoError(t, arm(now+5000))
		assert.NoError(t, arm(now+2000))
		earliest = now + 2000
	})
	e.clock.Set(h.WakeTimerAt("t1"))
	require.NoError(t, e.nextDelivery().err)
	assert.Equal(t, earliest, h.WakeTimerAt("t1"), "the earlier arm sets the timer")
	require.NoError(t, h.Close(ctx))
}
