package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/sim"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// errViolations is a campaign (or a check) that found broken invariants:
// exit code 1 once the summary is printed.
var errViolations = errors.New("invariants violated")

// simulateAbout is the paragraph of simulate's usage.
const simulateAbout = `Runs the seeded eviction simulator (DESIGN §14): the real guest killed at host
calls (or stopped gracefully, -stops), zombies, full disks and write locks
another connection holds, then the
checker; the summary ends with "violations: N" and any violation exits 1.
SEED, SESSIONS and KILLS in the environment set the campaign; flags win over
them.`

// simulate runs the eviction simulator (DESIGN §14) and prints its
// summary, whose last line is "violations: N". SEED, SESSIONS and KILLS in
// the environment set the campaign; flags win over them. With -check DIR
// it judges tree databases kept by an earlier run (-keep) instead.
func simulate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg := sim.DefaultConfig(1)
	for _, v := range []struct {
		name string
		dst  *int
	}{{"SESSIONS", &cfg.Sessions}, {"KILLS", &cfg.Kills}} {
		if s := getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return usagef("simulate: %s=%q is not a number", v.name, s)
			}
			*v.dst = n
		}
	}
	if s := getenv("SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return usagef("simulate: SEED=%q is not a number", s)
		}
		cfg.Seed = n
	}
	fs := newFlagSet("simulate", " [flags]", simulateAbout)
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "campaign seed (SEED)")
	fs.IntVar(&cfg.Sessions, "sessions", cfg.Sessions, "simulated sessions (SESSIONS)")
	fs.IntVar(&cfg.Kills, "kills", cfg.Kills, "kill budget spread over the sessions (KILLS)")
	fs.IntVar(&cfg.Workers, "workers", 0, "sessions run in parallel (0: GOMAXPROCS); results do not depend on it")
	fs.Float64Var(&cfg.Zombies, "zombies", cfg.Zombies, "share of sessions that get zombie instances")
	fs.Float64Var(&cfg.DiskFull, "diskfull", cfg.DiskFull, "share of sessions whose disk fills for windows of virtual time")
	fs.Float64Var(&cfg.BootFault, "bootfault", cfg.BootFault, "share of sessions whose disk fails writes within a boot's sweep, right after it listed the claims (none by default)")
	fs.Float64Var(&cfg.BootLock, "bootlock", cfg.BootLock, "share of sessions in which another connection holds the write lock within a boot, right after its sweep listed the claims or before its session listing (none by default)")
	fs.Float64Var(&cfg.Scripted, "scripted", cfg.Scripted, "share of sessions that run the scripted model, whose steps may ask for several tool calls")
	fs.Float64Var(&cfg.FinalAsk, "finalask", cfg.FinalAsk, "share of sessions whose operator makes the ask on the ahook tool final")
	fs.Float64Var(&cfg.Deletes, "deletes", cfg.Deletes, "share of sessions whose client deletes the tree at a moment of its life")
	fs.Float64Var(&cfg.DeleteFault, "delfault", cfg.DeleteFault, "share of the deleted trees whose delete fails after it closed the instance; half their reopens meet a write lock at their session listing (none by default)")
	fs.Float64Var(&cfg.ReopenRace, "reopenrace", cfg.ReopenRace, "share of the reopens after a -delfault delete within which a successor boots, before the reopen's epoch (none by default)")
	fs.Float64Var(&cfg.Flood, "flood", cfg.Flood, "share of the scripted trees' prompts whose answer streams more live deltas in one call than a watch's subscription holds (none by default)")
	fs.Float64Var(&cfg.Stops, "stops", cfg.Stops, "share of sessions whose guests are sometimes stopped gracefully (Shutdown, then Close, as a host's close) instead of killed (none by default)")
	fs.IntVar(&cfg.ResumeBudget, "budget", 0, "the guests' resume budget (0: core's default, or a small one for the -smallbudget share)")
	fs.Float64Var(&cfg.SmallBudget, "smallbudget", cfg.SmallBudget, "share of sessions whose resume budget is 1 or 2 (when -budget is 0)")
	fs.StringVar(&cfg.Dir, "keep", "", "keep every tree database and ledger in this directory")
	guest := fs.String("guest", "", "the guest module (.wasm); default: build ./wasm/guest")
	checkDir := fs.String("check", "", "judge the trees kept in this directory instead of simulating")
	trace := fs.Int("trace", -1, "print the trace of session N (from 0) before the summary: its guests' log lines, boots, kills, transactions, wake-ups, write locks, requests and events, at their virtual time (-1: none)")
	if done, err := parseFlags(fs, args, stdout); done || err != nil {
		return err
	}
	// Both directories hold tree databases, which SQLite would open as
	// URIs under a file: name: refused as the server's data directory is.
	for _, d := range []struct{ flag, dir string }{{"-keep", cfg.Dir}, {"-check", *checkDir}} {
		if err := host.CheckDataDir(d.dir); d.dir != "" && err != nil {
			return fmt.Errorf("simulate: %s: %w", d.flag, err)
		}
	}
	switch {
	// With no sessions at all (-sessions 0 or less) no -trace is out of
	// range: the campaign's own check names -sessions instead.
	case *trace < -1 || cfg.Sessions > 0 && *trace >= cfg.Sessions:
		return usagef("simulate: -trace %d: the campaign has sessions 0 to %d (-1: no trace)", *trace, cfg.Sessions-1)
	case *trace >= 0 && *checkDir != "":
		return usagef("simulate: -trace and -check: -check judges kept trees and runs no campaign to trace")
	}
	if *checkDir != "" {
		return checkKept(*checkDir, cfg.ResumeBudget, stdout)
	}
	// Before the guest is read or built (seconds on a first build): a
	// campaign that cannot run is refused at once, as sim.Run would.
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	cfg.Keep = cfg.Dir != ""
	if *trace >= 0 {
		cfg.Trace, cfg.TraceTree = stdout, *trace
	}
	cfg.Progress = os.Stderr // sessions, kills and violations so far
	if dir, err := os.UserCacheDir(); err == nil {
		cfg.CacheDir = filepath.Join(dir, "revenant", "wazero")
	}

	var wasm []byte
	var err error
	if *guest != "" {
		wasm, err = readGuestModule(*guest)
	} else {
		wasm, _, err = guestbuild.Build()
	}
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	res, err := sim.Run(ctx, cfg, wasm)
	if err != nil {
		return err // an interrupted campaign too: it judged nothing it cut
	}
	return report(res, stdout)
}

// report prints a campaign's summary, and is errViolations if it found
// any.
func report(res *sim.Result, stdout io.Writer) error {
	res.Print(stdout)
	if len(res.Violations) > 0 {
		return fmt.Errorf("simulate: seed %d: %d violations, the first: %s: %w", res.Config.Seed, len(res.Violations), res.Violations[0], errViolations)
	}
	return nil
}

// checkKept judges every tree database in dir with the ledger written
// beside it (NAME.db and NAME.ledger.json).
func checkKept(dir string, budget int, stdout io.Writer) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.db"))
	if err != nil {
		return fmt.Errorf("simulate: check: %w", err)
	}
	if len(paths) == 0 {
		// A mistyped or empty DIR judges nothing: that is no pass.
		return fmt.Errorf("simulate: check: no tree databases (*.db) in %s; give the directory a campaign kept with -keep", dir)
	}
	var all []check.Violation
	for _, p := range paths {
		if strings.HasSuffix(p, ".before.db") {
			continue // a deleted tree's copy, judged with it
		}
		var l check.Ledger
		if b, err := os.ReadFile(strings.TrimSuffix(p, ".db") + ".ledger.json"); err == nil {
			if err := json.Unmarshal(b, &l); err != nil {
				return fmt.Errorf("simulate: check: ledger of %s: %w", p, err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("simulate: check: %w", err)
		}
		before := strings.TrimSuffix(p, ".db") + ".before.db"
		if _, err := os.Stat(before); err != nil || l.Delete == nil || !l.Delete.Committed {
			before = ""
		}
		res, err := check.DeletedTree(p, before, &l, check.Options{Label: filepath.Base(p), Budget: budget})
		if err != nil {
			return fmt.Errorf("simulate: check: %w", err)
		}
		fmt.Fprintf(stdout, "%s: %d sessions, %d events, %d prompts, %d violations\n", filepath.Base(p), res.Sessions, res.Events, res.Prompts, len(res.Violations))
		for _, v := range res.Violations {
			fmt.Fprintf(stdout, "  %s\n", v)
		}
		all = append(all, res.Violations...)
	}
	fmt.Fprintf(stdout, "violations: %d\n", len(all))
	if len(all) > 0 {
		return fmt.Errorf("simulate: check: %d violations, the first: %s: %w", len(all), all[0], errViolations)
	}
	return nil
}
