package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A wake handler that arms twice, one arm stored and an earlier one
// storage refuses, in either order, has a successful delivery: the row
// keeps the stored time (for a restart), and this process still fires
// the refused earlier one at its own time, set once the delivery ends
// (waker.armWanted), not on the wake schedule of a failed delivery.
func TestRearmRefusedBesideAStoredOneStillFires(t *testing.T) {
	for _, refusedFirst := range []bool{false, true} {
		name := map[bool]string{false: "stored_first", true: "refused_first"}[refusedFirst]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			vfs := "host-rearm-mixed-" + name
			fault := e.faultVFS(t, vfs)
			h, tree, arm := e.guestTreeWithClaim(t, host.WithVFS(e.config(), vfs))

			var later, earlier int64
			var storedErr, refusedErr error
			tree.setOnWake(func() {
				later = e.clock.Now() + time.Hour.Milliseconds()
				earlier = e.clock.Now() + 3000
				refuse := func() {
					fault.FailFor(time.Hour, faultvfs.Full)
					refusedErr = arm(earlier)
					fault.Heal()
				}
				if refusedFirst {
					refuse()
					storedErr = arm(later)
				} else {
					storedErr = arm(later)
					refuse()
				}
			})
			require.NoError(t, arm(e.clock.Now()+1000))
			e.clock.Advance(time.Second)
			d := e.nextDelivery()
			require.Equal(t, "t1", d.id)
			require.NoError(t, storedErr)
			require.Error(t, refusedErr, "storage refused the earlier arm")
			require.NoError(t, d.err, "another arm of the delivery stored a row")
			assert.Equal(t, map[string]int64{"t1": later}, e.wakeups(), "the row keeps the stored time")
			assert.Equal(t, earlier, h.WakeTimerAt("t1"), "the refused earlier arm is fired at its time")

			tree.setOnWake(nil)
			e.clock.Set(earlier)
			d = e.nextDelivery()
			require.Equal(t, "t1", d.id, "delivered at the refused arm's time")
			require.NoError(t, h.Close(ctx))
		})
	}
}
