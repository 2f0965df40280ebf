package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
)

// A session the simulator could not run (here: its database cannot be
// opened, a directory standing where its WAL's shared memory goes, so no
// guest boots) is a violation of the campaign, not a quiet gap: the
// promise was not shown kept. Progress and the summary count it. (An
// interrupted campaign is another matter: TestInterruptedCampaign….)
func TestSessionThatCannotRunIsAViolation(t *testing.T) {
	wasm := guestbuild.Must(t)
	dir := t.TempDir()
	for _, name := range []string{"tree0000.db-shm", "tree0001.db-shm"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o700))
	}
	var prog bytes.Buffer
	cfg := sim.Config{Seed: 5, Sessions: 2, Kills: 2, Workers: 1, Dir: dir, CacheDir: cacheDir(t), Progress: &prog}
	res, err := sim.Run(context.Background(), cfg, wasm)
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
	assert.Contains(t, prog.String(), fmt.Sprintf("2/2 sessions, %d kills, %d violations so far", res.Hist.Kills(), len(res.Violations)))
	var out bytes.Buffer
	res.Print(&out)
	assert.True(t, strings.HasSuffix(out.String(), fmt.Sprintf("violations: %d\n", len(res.Violations))), out.String())
	assert.Positive(t, len(res.Violations))
}

// A directory that already holds a tree of the campaign (an earlier
// campaign kept there) is refused before anything runs: booted over
// another campaign's history, the tree would be no function of the seed,
// and the checker would report violations no guest made. The kept files
// are left as they were.
func TestRunRefusesADirectoryHoldingAnEarlierCampaign(t *testing.T) {
	wasm := guestbuild.Must(t)
	dir := t.TempDir()
	cfg := sim.Config{Seed: 1, Sessions: 2, Kills: 3, Workers: 1, Dir: dir, Keep: true, CacheDir: cacheDir(t)}
	res, err := sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
	require.Empty(t, res.Violations)
	kept, err := os.ReadFile(filepath.Join(dir, "tree0001.db"))
	require.NoError(t, err)

	cfg.Seed, cfg.Keep = 2, false
	res, err = sim.Run(context.Background(), cfg, wasm)
	require.Error(t, err, "a second campaign into the same directory")
	assert.Nil(t, res)
	assert.Contains(t, err.Error(), "tree0000.db")
	again, err := os.ReadFile(filepath.Join(dir, "tree0001.db"))
	require.NoError(t, err)
	assert.Equal(t, kept, again, "the kept tree is untouched")
	assert.FileExists(t, filepath.Join(dir, "tree0000.ledger.json"))

	// With the trees' files gone (their ledgers may stay), it runs.
	dbs, err := filepath.Glob(filepath.Join(dir, "tree*.db*"))
	require.NoError(t, err)
	for _, f := range dbs {
		require.NoError(t, os.Remove(f))
	}
	_, err = sim.Run(context.Background(), cfg, wasm)
	require.NoError(t, err)
}
