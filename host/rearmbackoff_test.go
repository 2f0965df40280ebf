package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
