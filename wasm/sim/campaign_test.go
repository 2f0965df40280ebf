package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// A session the simulator could not run (here: its context was cancelled,
// so no guest boots) is a violation of the campaign, not a quiet gap: the
// promise was not shown kept. Progress and the summary count it.
func TestSessionThatCannotRunIsAViolation(t *testing.T) {
	wasm := guestbuild.Must(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var prog bytes.Buffer
	cfg := sim.Config{Seed: 5, Sessions: 2, Kills: 2, Workers: 1, Dir: t.TempDir(), CacheDir: cacheDir(t), Progress: &prog}
	res, err := sim.Run(ctx, cfg, wasm)
	require.NoError(t, err)
	failures := 0
	for _, s := range res.Sessions {
		require.NotEmpty(t, s.Failures, "session %d ran though its context was cancelled", s.Index)
		failures += len(s.Failures)
	}
	simulation := 0
	for _, v := range res.Violations {
		if v.Rule == sim.RuleSimulation {
			simulation++
			assert.Contains(t, v.Tree, "seed 5 session ")
		}
	}
	assert.Equal(t, failures, simulation, "each failure is a violation")
	assert.Contains(t, prog.String(), fmt.Sprintf("2/2 sessions, 0 kills, %d violations so far", len(res.Violations)))
	var out bytes.Buffer
	res.Print(&out)
	assert.True(t, strings.HasSuffix(out.String(), fmt.Sprintf("violations: %d\n", len(res.Violations))), out.String())
	assert.Positive(t, len(res.Violations))
}

// What the checker finds in a tree reaches the campaign's result. A tree
// whose file already holds another campaign's history (a second run into
// the same kept directory) breaks the ledger's rules: effects its
// receiver never saw, replies no client of this run sent.
func TestCheckerViolationsReachTheResult(t *testing.T) {
	wasm := guestbuild.Must(t)
	dir := t.TempDir()
	cfg := sim.Config{Seed: 1, Sessions: 1, Kills: 3, Workers: 1, Dir: dir, Keep: true, CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	require.Empty(t, res.Violations)

	cfg.Seed, cfg.Keep = 2, false
	res, err = sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	var checked []check.Violation
	for _, s := range res.Sessions {
		checked = append(checked, s.Check.Violations...)
	}
	require.NotEmpty(t, checked, "the stale history breaks the ledger's rules")
	for _, v := range checked {
		assert.Contains(t, res.Violations, v)
	}
	rules := map[check.Rule]bool{}
	for _, v := range res.Violations {
		rules[v.Rule] = true
	}
	assert.True(t, rules[check.RuleEffects], "effects its receiver never saw: %v", rules)
}
