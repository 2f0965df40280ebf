package recovery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// A sweep that cannot list the claims reports it: a wake-up whose sweep
// read nothing must not look like one that found nothing to do.
func TestSweepReportsClaimsItCannotRead(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Kill.Kill() // the connection refuses every transaction from now on
	rep, err := recovery.Sweep(ctx, n.Inst)
	require.Error(t, err)
	assert.Empty(t, rep.Decisions)
}

// A boot over storage that takes no writes still returns its instance (it
// serves reads) beside the sweep's error, and its wake-up is armed for the
// claim the sweep could not act on: Wake re-arms even after a failed sweep,
// so the next try comes (DESIGN §4 rule 2, §8).
func TestReadOnlyBootReturnsItsInstanceAndRearms(t *testing.T) {
	tr := treetest.New(t)
	sid, _, _, inst := readOnlyBoot(t, tr)
	assert.True(t, inst.ReadOnly())
	assert.NotZero(t, tr.Wake.At(), "the wake-up is armed for the claim")
	assert.True(t, tr.Claim(sid).Exists)
}

// While sweeps fail in a row, the wake handler's last re-arm waits out the
// wake schedule (1 s doubling to 1 min, retry.Wake) instead of arming one
// wake interval ahead: a long storage outage costs a wake-up a minute, not
// one a second (DESIGN §4). The first sweep that succeeds ends the
// backoff: its re-arm is one interval ahead again.
func TestFailedSweepsBackOffTheRearm(t *testing.T) {
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithWakeInterval(time.Second) // the Worker's
	// The boot's sweep is the first to fail.
	sid, f, d, inst := readOnlyBoot(t, tr)
	for failed := 1; failed <= 8; failed++ {
		want := tr.Clock.Now() + retry.Wake().Delay(failed-1).Milliseconds()
		require.Equal(t, want, tr.Wake.At(), "re-armed after %d failed sweeps", failed)
		tr.Clock.Set(tr.Wake.At())
		require.True(t, tr.Wake.Take())
		_, err := recovery.Wake(ctx, inst)
		require.ErrorIs(t, err, core.ErrReadOnly)
	}
	assert.Equal(t, tr.Clock.Now()+time.Minute.Milliseconds(), tr.Wake.At(), "the backoff stops at a minute")

	f.Heal()
	tr.Clock.Set(tr.Wake.At())
	require.True(t, tr.Wake.Take())
	rep, err := recovery.Wake(ctx, inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Resume))
	assert.Equal(t, tr.Clock.Now()+time.Second.Milliseconds(), tr.Wake.At(), "a sweep that succeeded ends the backoff")
	d.Release()
	require.NoError(t, inst.WaitIdle(ctx))
	assert.False(t, tr.Claim(sid).Exists)
}

// readOnlyBoot leaves a claimed session s in tr (its execution held by d
// when it runs), crashes the instance that claimed it, and boots another
// over storage that takes no writes (a full disk for an hour): a boot
// whose sweep failed, and whose instance serves reads.
func readOnlyBoot(t *testing.T, tr *treetest.Tree) (sid string, f *faultvfs.Fault, d *treetest.Driver, inst *core.Instance) {
	t.Helper()
	f = tr.Faults()
	d = treetest.NewDriver(4)
	n := tr.Boot(d)
	sid = n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()
	tr.Wake.Take() // the earlier instance's wake-up is used up

	f.FailFor(time.Hour, faultvfs.Full)
	host, _, kdb := tr.Host()
	inst, _, err := recovery.Boot(ctx, host, tr.Cfg, d)
	require.ErrorIs(t, err, core.ErrReadOnly)
	require.NotNil(t, inst, "a boot whose sweep failed still serves")
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })
	return sid, f, d, inst
}
