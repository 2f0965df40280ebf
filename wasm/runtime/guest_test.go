package runtime_test

import (
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
