package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

func offlineConfig() runtime.BootConfig {
	return runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: 50 * time.Millisecond}}
}

func TestOfflineTurnSucceeds(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	require.Equal(t, runtime.PhaseServe, e.g.Phase())
	e.createAndPrompt("hello wasm world")

	snap := e.snapshot()
	require.Equal(t, "busy", snap.Status)
	e.fireTimers(60_000)

	snap = e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, 1, snap.Turns)
	require.Len(t, e.s.emitted("session.execution.succeeded@1"), 1)
	require.NotEmpty(t, e.s.emitted("session.text.delta@1"), "live deltas are emitted")
	last := snap.Messages[len(snap.Messages)-1]
	require.Equal(t, "assistant", last.Role)
	require.Contains(t, last.Text, "hello wasm world")

	// Durable emits arrive in commit order with contiguous seqs.
	var seq int64
	for _, ev := range e.s.emits {
		if ev.Durable() {
			require.Equal(t, seq+1, ev.Seq, "%s", ev.Type)
			seq = ev.Seq
		}
	}
	require.Equal(t, snap.Cursor, seq)
}

// Idle tells whether an execution runs in the guest (core.Instance.Idle),
// so a host can evict an idle guest as it would an in-process instance.
func TestIdleWhileNoExecutionRuns(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1, offlineConfig())
	g, err := compiled(t).Instantiate(ctx, runtime.Options{Conn: e.conn, Services: e.s})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(ctx) })
	_, err = g.Idle(ctx)
	require.ErrorIs(t, err, runtime.ErrNotBooted)
	require.NoError(t, g.Boot(ctx, e.cfg))
	e.g = g
	idle := func() bool {
		t.Helper()
		ok, err := g.Idle(ctx)
		require.NoError(t, err)
		return ok
	}
	require.True(t, idle(), "booted with nothing to run")
	e.createAndPrompt("one two three")
	require.False(t, idle(), "the turn runs (it waits on a timer)")
	require.NotNil(t, e.snapshot().Claim)
	require.False(t, idle(), "a request in between changes nothing")
	e.fireTimers(60_000)
	require.Equal(t, "idle", e.snapshot().Status)
	require.True(t, idle(), "the turn ended")
	require.Equal(t, runtime.PhaseServe, g.Phase(), "Idle runs nothing")
}

// DiagSQL runs its statements in one transaction through the SQL imports.
func TestDiagSQL(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1, offlineConfig())
	var sites []string
	counting := false
	require.NoError(t, e.boot(runtime.Options{Interpose: func(s runtime.Site) error {
		if counting && !s.After {
			sites = append(sites, s.Import)
		}
		return nil
	}}))
	counting = true
	require.NoError(t, e.g.DiagSQL(ctx, 3))
	require.Equal(t, []string{abi.ImportSQLBegin, abi.ImportSQLQuery, abi.ImportSQLQuery, abi.ImportSQLQuery, abi.ImportSQLCommit}, sites)
	require.False(t, e.conn.InTx())
	require.NoError(t, e.g.DiagSQL(ctx, 0))
}
