package core_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// interleavingDB runs between once, right after the next transaction it
// is given ends: another request's commit landing between two
// transactions of one call.
type interleavingDB struct {
	storage.DB
	mu      sync.Mutex
	between func()
}

func (d *interleavingDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	err := d.DB.Tx(ctx, fn)
	d.mu.Lock()
	f := d.between
	d.between = nil
	d.mu.Unlock()
	if f != nil {
		f()
	}
	return err
}

func (d *interleavingDB) arm(f func()) {
	d.mu.Lock()
	d.between = f
	d.mu.Unlock()
}

// A snapshot is one view of the log at its cursor (DESIGN §11: a client
// loads it, then follows the stream from the cursor). A prompt admitted
// while the snapshot is read (its commit landing after the snapshot's
// first transaction) is either wholly in it, cursor included, or wholly
// after it: never counted by the cursor while missing from the prompts,
// or listed while the cursor is before its admission. Split into two
// transactions, the follower would silently miss or double events.
func TestSnapshotIsOneViewAtItsCursor(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	host, _, kdb := tr.Host()
	idb := &interleavingDB{DB: host.DB}
	host.DB = idb
	inst, _, err := recovery.Boot(ctx, host, tr.Cfg, d)
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })

	s, err := inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "tester"})
	require.NoError(t, err)
	_, err = inst.Admit(ctx, s.ID, core.PromptInput{Text: "hold"})
	require.NoError(t, err)
	<-d.Started // held: nothing else writes while the snapshot is read

	idb.arm(func() {
		_, err := inst.Admit(ctx, s.ID, core.PromptInput{Text: "landed mid-snapshot"})
		require.NoError(t, err)
	})
	snap, err := inst.Snapshot(ctx, s.ID, 0, 50)
	require.NoError(t, err)

	var admitted []string // by the log, up to the snapshot's cursor
	for _, ev := range tr.Events(s.ID) {
		if ev.Type != event.PromptAdmitted || ev.Seq > snap.Cursor {
			continue
		}
		var a event.Admitted
		require.NoError(t, ev.Decode(&a))
		admitted = append(admitted, a.PromptID)
	}
	var listed []string
	for _, p := range snap.Prompts {
		listed = append(listed, p.ID)
	}
	slices.Sort(admitted)
	slices.Sort(listed)
	assert.Equal(t, admitted, listed, "the snapshot's open prompts are the log's at its cursor")
	d.Release()
}

// A snapshot's claim says whether its execution runs in this instance: a
// claim a crashed instance left runs nowhere until a sweep starts it here.
func TestSnapshotClaimSaysWhetherItRunsHere(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n1 := tr.Boot(d)
	sid := n1.NewSession("s")
	n1.Admit(sid, "hold")
	<-d.Started
	snap, err := n1.Inst.Snapshot(ctx, sid, 0, 10)
	require.NoError(t, err)
	require.NotNil(t, snap.Claim)
	assert.True(t, snap.Claim.RunningHere, "the turn runs in the instance that started it")
	n1.Crash()

	inst := openUnswept(t, tr, d)
	snap, err = inst.Snapshot(ctx, sid, 0, 10)
	require.NoError(t, err)
	require.NotNil(t, snap.Claim, "the crashed turn's claim stays")
	assert.Equal(t, core.StatusBusy, snap.Status)
	assert.False(t, snap.Claim.RunningHere, "no sweep has started it here yet")

	_, err = inst.Recover(ctx, sid, func(core.ClaimState, int64) core.Decision { return core.Decision{Action: core.Start} })
	require.NoError(t, err)
	<-d.Started
	snap, err = inst.Snapshot(ctx, sid, 0, 10)
	require.NoError(t, err)
	require.NotNil(t, snap.Claim)
	assert.True(t, snap.Claim.RunningHere, "the sweep started it here")
	d.Release()
	require.NoError(t, inst.WaitIdle(ctx))
}
