package sim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// SessionResult is what one simulated session did and what the checker
// found.
type SessionResult struct {
	Index   int
	Path    string // the tree's database (gone unless Config.Keep)
	Ledger  check.Ledger
	Boots   int
	Kills   int
	Zombies int
	// ZombieCalls are inputs (timers, egress answers) delivered to zombies
	// after their successor booted: each a chance to commit past the fence.
	ZombieCalls int
	// MidCall are the zombies abandoned at an egress start, their
	// successor booted within that call (maybeSupersede).
	MidCall int
	Steps   int
	// DiskFulls are the tree's windows of a full disk; FailedWrites the
	// writes that failed in them; LateIOErrs the commits reported failed
	// around them after they were durable.
	DiskFulls    int
	FailedWrites int
	LateIOErrs   int
	Virtual      time.Duration // virtual time from the first action to quiescence
	Hist         Histogram
	Check        check.Result
	Hash         [32]byte        // the session's event log and ledger
	Notes        map[string]Note // kind → count and first example
	Failures     []string        // the simulation itself went wrong (a trapped guest, no quiescence, an unexpected answer)
	// ResumeLatencies are, for each claim a boot resumed or started, the
	// virtual ms from the death of the guest that ran it to that boot.
	ResumeLatencies []int64
	// ReplyKills are the kills made while a reply to a question ran;
	// ReplyCommitKills those right after one of its commits.
	ReplyKills, ReplyCommitKills int
	// Abandoned are the questions and permission requests the client
	// never replied to: left waiting at quiescence, with their turns (and
	// the parents waiting on an asking child).
	Abandoned int
	// ChildSends counts the clients' prompts to children by the state of
	// the child they went to, and the interrupts that followed them.
	ChildSends childSends
	// Scripted: the tree ran the scripted model (script.go).
	Scripted bool
	// ProviderFails counts the failures its scripted model answered
	// (provider.go).
	ProviderFails int
	// Stops are the guests stopped gracefully instead of killed
	// (Config.Stops; stop.go), by moment: in a step, in a tool call, with
	// a turn parked, otherwise at rest. They spent kill budget but are not
	// among Kills, nor are the plans chosen to stop a guest that a kill or
	// an earlier plan's stop overtook (stopper.chosen).
	Stops [stopMoments]int
	// BootFaults are the windows of failed writes opened within a boot's
	// sweep (Config.BootFault; bootfault.go), BootLocks those of another
	// connection's write lock (Config.BootLock); BootFaultsServed and
	// BootLocksServed count the boots that met one and served.
	BootFaults, BootLocks             int
	BootFaultsServed, BootLocksServed int
	// BootLockListings are the BootLocks opened at a session listing
	// (maybeListingLock), refusing it: BootLockListingsServed count the
	// boots that met one there and served, BootLockReopens those opened
	// at a reopen's listing (a wake-up's, not a boot's).
	BootLockListings, BootLockListingsServed, BootLockReopens int
	// BootLockWakeDueJudged counts the wake-ups judged on their due time
	// (checkWakeDue) in a tree after one of its BootLocks opened.
	BootLockWakeDueJudged int
	// Busy counts the guests' transactions refused SQLITE_BUSY.
	Busy int
	// DeleteFaults are the delete commits failed after the close
	// (Config.DeleteFault; deletefault.go), DeleteReopens the reopens
	// that followed, DeleteReopenListings those whose session listing
	// another connection's write lock refused.
	DeleteFaults, DeleteReopens, DeleteReopenListings int
	// ReopenRaces are the reopens within which a successor booted
	// (Config.ReopenRace; maybeRaceReopen).
	ReopenRaces int
	// Floods are the flooded answers delivered (Config.Flood), FellBehind
	// those whose call emitted fewer live deltas than their events.
	Floods, FellBehind int
}

// Result is a whole campaign.
type Result struct {
	Config     Config
	Sessions   []SessionResult // in session order
	Hist       Histogram
	Hash       string // of every session's hash, in session order
	Violations []check.Violation
	Wall       time.Duration
}

// Run runs a campaign with the guest module wasm.
func Run(ctx context.Context, cfg Config, wasm []byte) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	began := time.Now()
	mod, err := runtime.Compile(ctx, wasm, runtime.CompileOptions{CacheDir: cfg.CacheDir})
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	defer mod.Close(context.Background())
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "revenant-sim-"); err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		if !cfg.Keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	} else if err := unused(dir, cfg.Sessions); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}

	workers := cfg.Workers
	if workers <= 0 {
		workers = goruntime.GOMAXPROCS(0)
	}
	results := make([]SessionResult, cfg.Sessions)
	jobs := make(chan int)
	finished := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, cfg.Sessions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] = runSession(ctx, mod, cfg, i, dir)
				finished <- i
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := range cfg.Sessions {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return // interrupted: start no more sessions
			}
		}
	}()
	go func() {
		wg.Wait()
		close(finished)
	}()
	prog := newProgress(cfg, began)
	for i := range finished {
		// A session that ends once the campaign was interrupted was cut
		// by it: its failures are the interrupt's, not the guest's.
		if ctx.Err() == nil {
			prog.done(&results[i])
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simulate: seed %d: interrupted after %d of %d sessions (%d violations among them; the sessions it cut are not judged): %w",
			cfg.Seed, prog.n, cfg.Sessions, prog.violations, err)
	}

	res := gather(cfg, results)
	res.Wall = time.Since(began)
	return res, nil
}

// gather is the campaign's result from its sessions': their kill sites
// added up, their hashes hashed in session order, and every violation the
// checker found and every failure of the simulation itself, in session
// order.
func gather(cfg Config, results []SessionResult) *Result {
	res := &Result{Config: cfg, Sessions: results, Hist: Histogram{}}
	h := sha256.New()
	for i := range results {
		r := &results[i]
		res.Hist.add(r.Hist)
		h.Write(r.Hash[:])
		res.Violations = append(res.Violations, r.Check.Violations...)
		for _, f := range r.Failures {
			res.Violations = append(res.Violations, check.Violation{Tree: label(cfg.Seed, i), Rule: RuleSimulation, Detail: f})
		}
	}
	res.Hash = hex.EncodeToString(h.Sum(nil))
	return res
}

// unused reports an error if dir already holds a database of one of the
// campaign's trees (an earlier campaign kept there): a tree booted over
// another campaign's history is no function of this campaign's seed, and
// its checker, whose ledger does not explain that history, reports
// violations no guest made.
func unused(dir string, sessions int) error {
	for i := range sessions {
		name := filepath.Join(dir, treeFile(i))
		for _, suffix := range []string{"", "-wal"} {
			if _, err := os.Lstat(name + suffix); err == nil {
				return fmt.Errorf("%s already holds %s from an earlier campaign: keep each campaign in a directory of its own", dir, filepath.Base(name+suffix))
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// treeFile is the name of tree i's database.
func treeFile(i int) string { return fmt.Sprintf("tree%04d.db", i) }

// Note is something a campaign saw that breaks no invariant but is worth
// knowing (boots that failed while the disk was full, 5xx answers).
type Note struct {
	Count   int
	Example string
}

// RuleSimulation reports a simulation that could not run as designed: a
// guest that trapped, a tree that never went quiet, an answer no client
// should get. It counts as a violation: the promise was not shown kept.
const RuleSimulation check.Rule = "simulation"

func label(seed uint64, i int) string { return fmt.Sprintf("seed %d session %d", seed, i) }

// runSession simulates tree i to quiescence and checks it.
func runSession(ctx context.Context, mod *runtime.Module, cfg Config, i int, dir string) SessionResult {
	t := newTree(mod, cfg, i, dir)
	t.run(ctx)
	r := SessionResult{Index: i, Path: t.path, Ledger: t.ledger, Boots: t.boots, Kills: t.kills, Zombies: t.zombieCount,
		ZombieCalls: t.zombieCalls, MidCall: t.midCall, DiskFulls: t.diskFulls, Steps: t.steps, Virtual: time.Duration(t.now-start) * time.Millisecond, Hist: t.hist, Failures: t.failures, Notes: t.notes,
		ResumeLatencies: t.latencies, ReplyKills: t.ask.replyKills, ReplyCommitKills: t.ask.commitKills, Abandoned: t.ask.abandoned, ChildSends: t.children, Scripted: t.work.multi,
		ProviderFails: t.providerFails}
	if t.stop != nil {
		r.Stops = t.stop.stops
		// Every plan turned into a stop, not only those that stopped a
		// guest: a stop due that a kill overtook, or a second plan of the
		// same input that chose a stop, killed nothing either.
		r.Kills -= t.stop.chosen
	}
	if t.bootFault != nil {
		r.BootFaults, r.BootFaultsServed = t.bootFault.n, t.bootFault.served
	}
	if t.bootLock != nil {
		r.BootLocks, r.BootLocksServed = t.bootLock.n, t.bootLock.served
		r.BootLockListings, r.BootLockListingsServed, r.BootLockReopens = t.bootLock.listings, t.bootLock.listingsServed, t.bootLock.reopens
		r.BootLockWakeDueJudged = t.bootLock.wakeDueJudged
	}
	if df := t.delFault; df != nil {
		r.DeleteFaults, r.DeleteReopens, r.DeleteReopenListings = df.failed, df.reopens, df.listings
		r.ReopenRaces = df.raced
	}
	r.Floods, r.FellBehind = t.floods, t.fellBehind
	r.Busy = t.busy
	if t.fault != nil {
		r.FailedWrites = t.fault.Failed()
		r.LateIOErrs = t.fault.LateCommits()
	}
	// A deleted tree's log is judged as it was just before its delete
	// committed (delete.go), and hashed so.
	judged, before := t.path, ""
	if t.del != nil && t.del.committed && t.del.copied {
		judged, before = t.del.before, t.del.before
	}
	cr, err := check.DeletedTree(t.path, before, &t.ledger, check.Options{Label: label(cfg.Seed, i), Budget: t.ledger.Budget})
	if err != nil {
		r.Failures = append(r.Failures, fmt.Sprintf("check: %v", err))
	}
	r.Check = cr
	hash, err := historyHash(judged, &t.ledger)
	if err != nil {
		r.Failures = append(r.Failures, fmt.Sprintf("hash: %v", err))
	}
	r.Hash = hash
	if cfg.Keep {
		if b, err := json.MarshalIndent(&t.ledger, "", "  "); err != nil {
			r.Failures = append(r.Failures, fmt.Sprintf("keep ledger: %v", err))
		} else if err := os.WriteFile(strings.TrimSuffix(t.path, ".db")+".ledger.json", b, 0o644); err != nil {
			r.Failures = append(r.Failures, fmt.Sprintf("keep ledger: %v", err))
		}
	} else {
		t.removeFiles()
	}
	return r
}

// historyHash hashes a tree's whole event log, in session and seq order,
// and its ledger: two runs of a seed must agree on every byte of both.
func historyHash(path string, l *check.Ledger) ([32]byte, error) {
	var out [32]byte
	abs, err := filepath.Abs(path)
	if err != nil {
		return out, err
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro"}
	c, err := sqlite3.OpenFlags(u.String(), sqlite3.OPEN_READONLY|sqlite3.OPEN_URI)
	if err != nil {
		return out, err
	}
	defer c.Close()
	s, _, err := c.Prepare(`SELECT session_id, seq, id, type, at, data FROM events ORDER BY session_id, seq`)
	if err != nil {
		return out, err
	}
	defer s.Close()
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for s.Step() {
		field(s.ColumnRawText(0))
		binary.BigEndian.PutUint64(n[:], uint64(s.ColumnInt64(1)))
		h.Write(n[:])
		field(s.ColumnRawText(2))
		field(s.ColumnRawText(3))
		binary.BigEndian.PutUint64(n[:], uint64(s.ColumnInt64(4)))
		h.Write(n[:])
		field(s.ColumnRawText(5))
	}
	if err := s.Err(); err != nil {
		return out, err
	}
	b, err := json.Marshal(hashed(l))
	if err != nil {
		return out, err
	}
	field(b)
	copy(out[:], h.Sum(nil))
	return out, nil
}

// hashed is l as the history hash sees it: without the commits'
// attribution to instances (check.Emits.Commits), which only explains the
// log, hashed already, nor the steps whose deltas each instance emitted and
// when each went quiet (Deltas, Settled: what the guest's threads did
// between the events the history has), so histories hashed before they
// were recorded still compare.
func hashed(l *check.Ledger) *check.Ledger {
	if l.Emits == nil {
		return l
	}
	c, e := *l, *l.Emits
	e.Commits, e.Deltas, e.Settled = nil, nil, nil
	c.Emits = &e
	return &c
}
