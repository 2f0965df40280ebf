package recovery_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// The guest boots through recovery's sequence with a step of its own
// between opening and sweeping (its handler, its watches): that step sees
// the open instance before the sweep has acted, and the sweep then resumes
// the dead turn before the boot returns.
func TestBootWithRunsOpenedBeforeTheSweep(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()

	host, _, _ := tr.Host()
	var seen []core.ClaimState
	inst, rep, err := recovery.BootWith(ctx, host, tr.Cfg, d, func(inst *core.Instance) error {
		var err error
		seen, err = inst.Claims(ctx)
		return err
	})
	require.NoError(t, err)
	require.NotNil(t, inst)
	t.Cleanup(func() { inst.Abandon() })
	require.Len(t, seen, 1)
	assert.Zero(t, seen[0].Attempts, "opened runs before the sweep counts the resume")
	assert.Equal(t, 1, rep.Count(core.Resume), "the sweep resumed the turn before the boot returned")
	<-d.Started
	d.Release()
	require.NoError(t, inst.WaitIdle(ctx))
}

// A host step that fails fails the boot: no instance is returned, and the
// sweep never runs.
func TestBootWithFailingOpenedSweepsNothing(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()

	host, _, _ := tr.Host()
	boom := errors.New("handler setup failed")
	var opened *core.Instance
	var watch *core.Subscription
	inst, rep, err := recovery.BootWith(ctx, host, tr.Cfg, d, func(inst *core.Instance) error {
		opened, watch = inst, inst.Subscribe(sid, 1) // as the guest's watches
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Nil(t, inst)
	assert.Empty(t, rep.Decisions)
	assert.Zero(t, tr.Claim(sid).Attempts, "nothing was resumed")
	assert.True(t, opened.Closed(), "the instance the host step refused is closed")
	select {
	case _, open := <-watch.C:
		assert.False(t, open, "and what the step opened on it ends")
	default:
		t.Error("a subscription the step opened is still open")
	}
}
