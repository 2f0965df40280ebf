package sim_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
)

// The trace of a session holds its guests' own log lines (the log import,
// which the simulator otherwise discards) among what happened to it, each
// at its virtual time, and nothing of any other session; and tracing
// changes no history.
func TestTraceHasTheGuestsLogLines(t *testing.T) {
	wasm := guestbuild.Must(t)
	run := func(trace *bytes.Buffer) *sim.Result {
		cfg := sim.Config{Seed: 10, Sessions: 2, Kills: 10, Workers: 2, Dir: t.TempDir(), CacheDir: cacheDir(t)}
		if trace != nil {
			cfg.Trace, cfg.TraceTree = trace, 1
		}
		res, err := sim.Run(context.Background(), cfg, wasm)
		require.NoError(t, err)
		return res
	}
	var trace bytes.Buffer
	traced, untraced := run(&trace), run(nil)
	assert.Equal(t, untraced.Hash, traced.Hash, "a traced campaign's history is the untraced one's")

	lines := strings.Split(strings.TrimSpace(trace.String()), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, "tree0001 +"), "every line is session 1's, at a virtual time: %q", l)
	}
	out := trace.String()
	// "execution running" is core's, logged inside the guest: a line
	// only the log import brings out.
	assert.Regexp(t, `(?m)^tree0001 \+\d+\.\d{3}s boot \d+ log DEBUG: execution running `, out)
	assert.Contains(t, out, "boot 1 boots")
	assert.Contains(t, out, "client sends POST /v1/sessions to boot")
	assert.Contains(t, out, "arms the wake-up for +")
	assert.Contains(t, out, "BEGIN: takes the write lock")
}
