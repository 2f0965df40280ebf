package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A wake handler's arms, stored or refused, are each kept at their
// earliest: the row stores the earliest stored arm (a later one does not
// replace it, though the delivery used the old row up), and the timer
// fires at the earliest arm of all, here a refused one that came before
// a later refused one (both earlier than the row, so both must write).
func TestRearmsOfADeliveryKeepTheEarliest(t *testing.T) {
	e := newEnv(t)
	vfs := "host-rearm-earliest"
	fault := e.faultVFS(t, vfs)
	h, tree, arm := e.guestTreeWithClaim(t, host.WithVFS(e.config(), vfs))

	var stored, refused int64
	var errs []error
	tree.setOnWake(func() {
		now := e.clock.Now()
		stored, refused = now+time.Minute.Milliseconds(), now+3000
		errs = append(errs, arm(stored), arm(now+time.Hour.Milliseconds()))
		fault.FailFor(time.Hour, faultvfs.Full)
		errs = append(errs, arm(refused), arm(now+6000))
		fault.Heal()
	})
	require.NoError(t, arm(e.clock.Now()+1000))
	e.clock.Advance(time.Second)
	d := e.nextDelivery()
	require.Equal(t, "t1", d.id)
	require.NoError(t, d.err, "arms of the delivery stored a row")
	require.Len(t, errs, 4)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Error(t, errs[2])
	require.Error(t, errs[3])
	assert.Equal(t, map[string]int64{"t1": stored}, e.wakeups(), "the row keeps the earliest stored arm")
	assert.Equal(t, refused, h.WakeTimerAt("t1"), "the earliest arm, refused, sets the timer")
	require.NoError(t, h.Close(ctx))
}
