package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A full disk under the data directory refuses the index's writes as well
// as the trees'. A tree whose turn runs here then sweeps without error
// (nothing of its own to resume), but the wake handler's last act, the
// re-arm, cannot store its row, so every delivery fails. docs/api.md
// (Storage failures) promises that the wake-up then comes back on the wake
// schedule, "1 s, 2 s, 4 s … up to a minute apart, not every wake interval",
// as TestFailingSweepsAreWokenOnTheWakeSchedule checks for failing sweeps.
// Found by a black-box kill campaign on a full tmpfs (session 62's probe):
// the server logged "wake-up delivery failed; retrying in=1m0s" once a
// second, at the wake interval, for as long as the disk stayed full.
func TestFailedRearmsAreWokenOnTheWakeSchedule(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Second)
	vfs := "host-rearm-backoff"
	fault := e.faultVFS(t, vfs)
	h := e.open(host.WithVFS(e.config(), vfs))
	admit(t, e.tree(h, "t"), "t", "hold")
	e.d.next(t) // the turn runs here and writes nothing while it holds
	defer e.d.Release()

	fault.FailFor(time.Hour, faultvfs.Full)
	for failed := 1; failed <= 8; failed++ {
		e.clock.Set(h.WakeTimerAt("t"))
		require.Error(t, e.nextDelivery().err, "delivery %d: its re-arm cannot store the row", failed)
		want := e.clock.Now() + retry.Wake().Delay(failed-1).Milliseconds()
		require.Equal(t, want, h.WakeTimerAt("t"), "the wake-up after %d failed deliveries", failed)
	}
}

// Outside a delivery the wake-up is armed too, and on a full disk as often
// as clients write: every claiming write arms a wake interval ahead before
// each attempt (core's claimingWrite: a client's prompt, a turn's end, an
// interrupt, each retried on the write schedule), and a guest's sweep that
// waited for storage on its timers past the wake call re-arms when it
// ends, after the host settled the delivery. In a run of failed deliveries
// the retry is set on the wake schedule, and such an arm must not bring it
// back to one wake interval, or a tree whose storage stays full while
// clients keep writing to it is woken every wake interval, not 1 s, 2 s,
// 4 s … a minute apart (docs/api.md, Storage failures). Usually the
// failed delivery's used-up row is kept, in the past, and covers the arm
// (nothing to write, so nothing refused); with no row (the tree's first
// arm was refused, fired from memory) storage refuses the arm. After a
// delivery that succeeded, an arm is fired at its own time again, refused
// or not (TestGuestWakeArmEarlierIsDeliveredEarlier).
func TestArmsOutsideFailedDeliveriesKeepTheWakeSchedule(t *testing.T) {
	for _, stored := range []bool{true, false} {
		name := map[bool]string{true: "row_kept", false: "no_row"}[stored]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			vfs := "host-rearm-outside-" + name
			fault := e.faultVFS(t, vfs)
			h, tree, arm := e.guestTreeWithClaim(t, host.WithVFS(e.config(), vfs))
			interval := core.DefaultWakeInterval.Milliseconds() // newEnv's core config
			require.Empty(t, e.wakeups(), "the boot's delivery used the row up")

			tree.setOnWake(func() { _ = arm(e.clock.Now() + 1000) }) // the sweep's re-arm, refused
			if stored {
				require.NoError(t, arm(e.clock.Now()+1000))
				fault.FailFor(time.Hour, faultvfs.Full)
			} else {
				fault.FailFor(time.Hour, faultvfs.Full)
				require.Error(t, arm(e.clock.Now()+1000), "the first arm, refused, is fired from memory")
			}
			for failed := 1; failed <= 8; failed++ {
				e.clock.Set(h.WakeTimerAt("t1"))
				require.Error(t, e.nextDelivery().err, "delivery %d: its re-arm cannot store the row", failed)
				want := e.clock.Now() + retry.Wake().Delay(failed-1).Milliseconds()
				err := arm(e.clock.Now() + interval)
				if stored {
					require.NoError(t, err, "the kept row covers an arm after the delivery")
				} else {
					require.Error(t, err, "storage refuses an arm after the delivery")
				}
				require.Equal(t, want, h.WakeTimerAt("t1"), "the wake-up after %d failed deliveries and an arm a wake interval ahead", failed)
			}

			tree.setOnWake(func() { _ = arm(e.clock.Now() + interval) })
			fault.Heal()
			e.clock.Set(h.WakeTimerAt("t1"))
			require.NoError(t, e.nextDelivery().err, "storage is back")
			fault.FailFor(time.Hour, faultvfs.Full)
			at := e.clock.Now() + 1000
			require.Error(t, arm(at))
			assert.Equal(t, at, h.WakeTimerAt("t1"), "after a delivery that succeeded, a refused arm is fired at its time")
			fault.Heal()
			require.NoError(t, h.Close(ctx))
		})
	}
}
