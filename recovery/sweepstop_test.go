package recovery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// A sweep whose recovery meets storage that takes no writes stops there:
// every other claim would meet the same (on the write schedule, up to
// 30 s each when storage is unavailable rather than read-only). The
// sweep's error is that one recovery's, and the claims stay for the
// wake-up's next sweep.
func TestSweepStopsAtStorageThatTakesNoWrites(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sids := []string{n.NewSession("s1"), n.NewSession("s2"), n.NewSession("s3")}
	for _, sid := range sids {
		n.Admit(sid, "hold")
		<-d.Started
	}
	n.Crash()
	tr.Wake.Take()

	f.FailFor(time.Hour, faultvfs.Full)
	host, _, kdb := tr.Host()
	inst, _, err := recovery.Boot(ctx, host, tr.Cfg, d)
	require.ErrorIs(t, err, core.ErrReadOnly)
	require.NotNil(t, inst)
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })

	rep, err := recovery.Sweep(ctx, inst)
	require.ErrorIs(t, err, core.ErrReadOnly)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "%T", err)
	assert.Len(t, joined.Unwrap(), 1, "one recovery tried: %v", err)
	assert.Empty(t, rep.Decisions)
	for _, sid := range sids {
		assert.True(t, tr.Claim(sid).Exists, sid)
	}
}
