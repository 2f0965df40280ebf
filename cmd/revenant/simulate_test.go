package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// guestFile is the guest module built for the tests, for -guest.
func guestFile(t *testing.T) string {
	_, file, err := guestbuild.Build()
	if err != nil {
		t.Fatalf("build the guest: %v", err)
	}
	return file
}

// The flags reach the campaign: its summary names the seed, the sessions,
// the kill budget and the shares asked for, -smallbudget gives its trees
// budgets of 1 or 2, and -keep leaves every tree's database and ledger,
// which -check then judges (and finds fine).
func TestSimulateFlagsReachTheCampaign(t *testing.T) {
	keep := t.TempDir()
	var out strings.Builder
	err := simulate(context.Background(), []string{"-seed", "3", "-sessions", "2", "-kills", "4", "-zombies", "0.25", "-diskfull", "0.5",
		"-smallbudget", "1", "-scripted", "0", "-workers", "1", "-guest", guestFile(t), "-keep", keep}, env(nil), &out)
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), "simulate: seed 3, 2 sessions, kill budget 4, zombie share 0.25, disk-full share 0.50,")
	assert.Contains(t, out.String(), "resume budgets: 2 sessions with a small one (1 or 2)")
	assert.Contains(t, out.String(), "sessions on the scripted model 0;")
	assert.True(t, strings.HasSuffix(out.String(), "violations: 0\n"), out.String())
	for _, f := range []string{"tree0000.db", "tree0000.ledger.json", "tree0001.db", "tree0001.ledger.json"} {
		assert.FileExists(t, filepath.Join(keep, f))
	}

	out.Reset()
	require.NoError(t, simulate(context.Background(), []string{"-check", keep}, env(nil), &out))
	assert.Contains(t, out.String(), "tree0000.db: ")
	assert.Contains(t, out.String(), "tree0001.db: ")
	assert.True(t, strings.HasSuffix(out.String(), "violations: 0\n"), out.String())
}

// A campaign with violations exits 1 (errViolations) after its summary.
func TestSimulateViolationsExitNonzero(t *testing.T) {
	var out strings.Builder
	res := &sim.Result{Config: sim.Config{Seed: 1}, Violations: []check.Violation{{Tree: "seed 1 session 0", Rule: sim.RuleSimulation, Detail: "the guest could not run"}}}
	err := report(res, &out)
	require.ErrorIs(t, err, errViolations)
	assert.NotContains(t, out.String(), "violations: 0\n")
	assert.Contains(t, out.String(), "simulation: seed 1 session 0")
}

// An interrupted campaign (here before its first session) is the
// interrupt's error, not violations: the sessions it cut are not judged.
func TestSimulateInterruptedIsNoViolation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out strings.Builder
	err := simulate(ctx, []string{"-sessions", "1", "-kills", "0", "-guest", guestFile(t), "-keep", t.TempDir()}, env(nil), &out)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, errViolations)
	assert.NotContains(t, out.String(), "violations:")
}

// -check of a kept tree whose ledger lost its deliveries (the receiver
// never saw the calls the log settled) reports the violations and exits 1.
func TestSimulateCheckViolationsExitNonzero(t *testing.T) {
	keep := t.TempDir()
	var out strings.Builder
	require.NoError(t, simulate(context.Background(), []string{"-seed", "1", "-sessions", "1", "-kills", "3", "-zombies", "0", "-diskfull", "0",
		"-scripted", "0", "-guest", guestFile(t), "-keep", keep}, env(nil), &out), out.String())
	path := filepath.Join(keep, "tree0000.ledger.json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var l check.Ledger
	require.NoError(t, json.Unmarshal(b, &l))
	require.NotEmpty(t, l.Deliveries, "the tree called its tools")
	l.Deliveries = nil
	b, err = json.Marshal(&l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))

	out.Reset()
	err = simulate(context.Background(), []string{"-check", keep}, env(nil), &out)
	require.ErrorIs(t, err, errViolations)
	assert.Contains(t, out.String(), string(check.RuleEffects)+": tree0000.db")
	assert.NotContains(t, out.String(), "violations: 0\n")
}

// -keep and -check refuse a directory named file:…, as the server's data
// directory is refused: SQLite reads such a name as a URI. Neither
// creates it, and no campaign runs (no guest is built or read).
func TestSimulateRefusesFileURIDirs(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"-keep", "file:x"}, {"-keep", "./file:x"}, {"-check", "file:x"}} {
		err := simulate(context.Background(), append(args, "-guest", "no-such.wasm"), env(nil), &strings.Builder{})
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), "simulate: "+args[0]+`: data directory`, args)
		assert.Contains(t, err.Error(), `begins with "file:", which SQLite reads as a URI, not a path`, args)
		assert.NoDirExists(t, "file:x", args)
	}
}

// -check on a directory with no tree database is an error, not
// "violations: 0": a mistyped DIR judged nothing and must not pass.
func TestSimulateCheckFindsNoTrees(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{empty, filepath.Join(empty, "missing")} {
		var out strings.Builder
		err := simulate(context.Background(), []string{"-check", dir}, env(nil), &out)
		require.Error(t, err, dir)
		assert.Contains(t, err.Error(), "no tree databases (*.db) in "+dir, dir)
		assert.NotContains(t, out.String(), "violations: 0", dir)
	}
}

// -trace N prints session N's trace before the summary (that the history
// is the untraced one's is wasm/sim's TestTraceHasTheGuestsLogLines); a
// session the campaign does not have, or a trace with -check (which runs no
// campaign), is a usage error, found before anything runs.
func TestSimulateTracePrintsOneSession(t *testing.T) {
	var out strings.Builder
	err := simulate(context.Background(), []string{"-seed", "3", "-sessions", "2", "-kills", "4", "-workers", "1", "-guest", guestFile(t), "-trace", "1"}, env(nil), &out)
	require.NoError(t, err, out.String())
	trace, summary, ok := strings.Cut(out.String(), "simulate: seed 3, 2 sessions")
	require.True(t, ok, out.String())
	assert.True(t, strings.HasPrefix(trace, "tree0001 +0.000s boot 1 boots\n"), trace)
	assert.NotContains(t, trace, "tree0000")
	assert.True(t, strings.HasSuffix(summary, "violations: 0\n"), summary)

	err = simulate(context.Background(), []string{"-sessions", "2", "-trace", "2"}, env(nil), io.Discard)
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, err.Error(), "-trace 2: the campaign has sessions 0 to 1")
	err = simulate(context.Background(), []string{"-trace", "-2"}, env(nil), io.Discard)
	require.ErrorIs(t, err, errUsage)
	err = simulate(context.Background(), []string{"-trace", "0", "-check", t.TempDir()}, env(nil), io.Discard)
	require.ErrorIs(t, err, errUsage)
	assert.Contains(t, err.Error(), "-trace and -check")

	// A campaign of no sessions is refused for that, not as a -trace
	// (-1, no trace) out of a range "0 to -2".
	err = simulate(context.Background(), []string{"-sessions", "-1", "-guest", guestFile(t)}, env(nil), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sessions -1 must be positive")
	assert.NotContains(t, err.Error(), "-trace")
}

// A campaign that cannot run (a share outside 0…1, NaN among them, no
// sessions) is refused before the guest is read or built, which takes
// seconds: the error names the setting, not the guest.
func TestSimulateRefusesABadCampaignBeforeTheGuest(t *testing.T) {
	for _, args := range [][]string{{"-deletes", "2"}, {"-zombies", "NaN"}, {"-sessions", "0"}} {
		err := simulate(context.Background(), append(args, "-guest", "no-such.wasm"), env(nil), &strings.Builder{})
		require.Error(t, err, args)
		assert.NotContains(t, err.Error(), "no-such.wasm", args)
	}
}
