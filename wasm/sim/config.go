package sim

import (
	"fmt"
	"io"
	"time"
)

// Config is one campaign.
type Config struct {
	// Seed fixes the whole campaign; session i runs on sub-seed (Seed, i).
	Seed uint64
	// Sessions is how many trees to simulate.
	Sessions int
	// Kills is the total kill budget, spread evenly over the sessions.
	Kills int
	// Workers run sessions in parallel; 0 means GOMAXPROCS. The results do
	// not depend on it.
	Workers int
	// Dir holds the trees' databases; "" uses a temporary directory that is
	// removed afterwards. With Keep the files stay.
	Dir  string
	Keep bool
	// ResumeBudget is the guests' resume budget; 0 means core's default
	// (or, for the SmallBudget share of trees, a small one).
	ResumeBudget int
	// SmallBudget is the share (0…1) of sessions that run with a resume
	// budget of 1 or 2 instead of the default (when ResumeBudget is 0): at
	// the default (10) no turn of a campaign reaches the budget, so the
	// rules of a budget reached (the count past it aborts at once, a
	// resume within it is never given up, each turn counts from 0) would
	// go unexercised.
	SmallBudget float64
	// Zombies is the share (0…1) of sessions that get a zombie: an
	// instance abandoned mid-turn that keeps running on its own connection
	// after its successor booted.
	Zombies float64
	// DiskFull is the share (0…1) of sessions whose disk fills for a few
	// windows of virtual time (internal/faultvfs): every write fails with
	// SQLITE_FULL or an IOERR while a window is open.
	DiskFull float64
	// BootFault is the share (0…1) of sessions whose disk fails writes
	// in the middle of a boot's sweep, right after it listed the claims
	// (bootfault.go): a few of their boots that find a session claimed
	// meet a window of 200 ms to 20 s of failed writes there. DiskFull's
	// windows follow virtual time, which stands still within a boot, so
	// without it no boot's recovery waits for storage.
	BootFault float64
	// BootLock is the share (0…1) of sessions in which another connection
	// takes the tree's write lock in the middle of a boot's sweep, right
	// after it listed the claims, for 200 ms to 20 s (bootfault.go): every
	// transaction of the guest's is refused SQLITE_BUSY meanwhile, as its
	// busy timeout is spent (the simulator's connections wait for no
	// lock). About half of the windows open instead before the session
	// listing of a boot or a reopen, refusing it. A tree with both shares
	// meets the disk's faults first.
	BootLock float64
	// FinalAsk is the share (0…1) of sessions whose operator makes the ask
	// on ahook final (a server rule with "final": true): an always reply
	// there approves its call only, and every later call asks again.
	// Without it no simulated request is final, and a bug that saves or
	// obeys a rule over a final ask goes unseen.
	FinalAsk float64
	// Scripted is the share (0…1) of sessions that run the scripted model
	// (script.go) instead of the offline one: their steps may ask for
	// several tool calls at once.
	Scripted float64
	// Deletes is the share (0…1) of sessions whose client deletes the tree
	// (DELETE /v1/sessions/{root}) at a moment of its life: while a turn
	// runs, while a question or permission request is pending, while
	// sub-agents run, or once it went quiet (delete.go). Without it no
	// tree is ever deleted, and a delete that leaves rows, or a tree that
	// comes back after it, goes unseen.
	Deletes float64
	// DeleteFault is the share (0…1) of the deleted trees (Deletes) whose
	// delete fails after it closed the instance, 1 to 3 times: the disk
	// refuses the COMMIT of its transaction, and the wake-up reopens the
	// instance, whose session listing another connection's write lock
	// refuses half the time (deletefault.go). Without it a delete fails
	// after the close only in a disk-full window, and a reopen's refused
	// listing goes unreached.
	DeleteFault float64
	// ReopenRace is the share (0…1) of the reopens after a delete the
	// delete faulter failed (DeleteFault) within which a successor boots:
	// at the reopen's first or second BEGIN, before it takes its epoch,
	// the serving guest is abandoned as a zombie and a new guest boots
	// within the call (deletefault.go, maybeRaceReopen). The reopen must
	// then take nothing; a zombie that takes an epoch after a newer boot
	// took one is a commit past the fence (check.RuleZombie). Without it
	// no boot ever happens while an older, closed instance reopens.
	ReopenRace float64
	// Flood is the share (0…1) of the scripted trees' prompts (Scripted)
	// whose text answer the scripted model streams in 1100 events with
	// text, delivered to the guest in one call (script.go, floodAnswer):
	// more live deltas than a watch's subscription holds, so it falls
	// behind. Without it no simulated step publishes near that many
	// between two quiet returns.
	Flood float64
	// Stops is the share (0…1) of sessions whose guests are sometimes
	// stopped gracefully instead of killed (stop.go): about half of their
	// kill plans that fire stop the guest as a host's close does
	// (Shutdown, then Close) once its input returns, in a step, in a tool
	// call or at rest. Without it no guest is ever stopped gracefully, and
	// a bug in the shutdown path (a claim released, a turn lost) goes
	// unseen.
	Stops float64
	// CacheDir keeps the guest's compiled code between runs ("" memory).
	CacheDir string
	// Progress, when not nil, hears how a campaign is going (sessions
	// done, kills and violations so far) every tenth of the sessions and
	// at least every ProgressEvery of wall time (default 5 s) while
	// sessions end. It is no part of the history.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Trace, when not nil, receives the trace of session TraceTree (its
	// index, from 0): its guests' log lines, their boots, kills and
	// transactions, wake-ups armed and delivered, the write lock another
	// connection takes, client requests and answers, egress and emitted
	// events, each at its virtual time (trace.go). Like Progress it is no
	// part of the history: a traced campaign's is the untraced one's.
	Trace     io.Writer
	TraceTree int
}

// Defaults of the default campaign (make simulate).
const (
	DefaultSessions = 200
	DefaultKills    = 2100
	DefaultZombies  = 0.5
	DefaultDiskFull = 0.25
	DefaultSmall    = 0.2
	DefaultScripted = 0.15
	DefaultFinalAsk = 0.25
)

// DefaultConfig is the default campaign for a seed.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Sessions: DefaultSessions, Kills: DefaultKills, Zombies: DefaultZombies, DiskFull: DefaultDiskFull, SmallBudget: DefaultSmall, Scripted: DefaultScripted, FinalAsk: DefaultFinalAsk}
}

// Validate refuses a campaign that cannot run as configured: no sessions,
// a negative kill budget, a share outside 0…1. Run checks it first;
// simulate checks it before it builds or reads a guest, which takes
// seconds.
func (c Config) Validate() error {
	switch {
	case c.Sessions <= 0:
		return fmt.Errorf("sessions %d must be positive", c.Sessions)
	case c.Kills < 0:
		return fmt.Errorf("kills %d must not be negative", c.Kills)
	case notShare(c.Zombies):
		return fmt.Errorf("zombie share %v must be within 0…1", c.Zombies)
	case notShare(c.DiskFull):
		return fmt.Errorf("disk-full share %v must be within 0…1", c.DiskFull)
	case notShare(c.Scripted):
		return fmt.Errorf("scripted-model share %v must be within 0…1", c.Scripted)
	case notShare(c.BootFault):
		return fmt.Errorf("boot-fault share %v must be within 0…1", c.BootFault)
	case notShare(c.BootLock):
		return fmt.Errorf("boot-lock share %v must be within 0…1", c.BootLock)
	case notShare(c.FinalAsk):
		return fmt.Errorf("final-ask share %v must be within 0…1", c.FinalAsk)
	case notShare(c.Deletes):
		return fmt.Errorf("delete share %v must be within 0…1", c.Deletes)
	case notShare(c.DeleteFault):
		return fmt.Errorf("delete-fault share %v must be within 0…1", c.DeleteFault)
	case notShare(c.Stops):
		return fmt.Errorf("stop share %v must be within 0…1", c.Stops)
	case notShare(c.Flood):
		return fmt.Errorf("flood share %v must be within 0…1", c.Flood)
	case c.DeleteFault > 0 && c.Deletes == 0:
		// A share of no trees: the campaign would reach nothing.
		return fmt.Errorf("delete-fault share %v is of the deleted trees, and none is deleted: give a delete share (-deletes) too", c.DeleteFault)
	case notShare(c.ReopenRace):
		return fmt.Errorf("reopen-race share %v must be within 0…1", c.ReopenRace)
	case c.ReopenRace > 0 && c.DeleteFault == 0:
		return fmt.Errorf("reopen-race share %v is of the reopens after a failed delete, and no delete fails: give a delete-fault share (-delfault) too", c.ReopenRace)
	case c.Flood > 0 && c.Scripted == 0:
		return fmt.Errorf("flood share %v is of the scripted trees' prompts, and no tree is scripted: give a scripted share (-scripted) too", c.Flood)
	case notShare(c.SmallBudget):
		return fmt.Errorf("small-budget share %v must be within 0…1", c.SmallBudget)
	case c.ResumeBudget < 0:
		return fmt.Errorf("resume budget %d must not be negative", c.ResumeBudget)
	}
	return nil
}

// notShare reports that x is no share, 0…1. Written as the negation of
// the range, not as x < 0 || x > 1, so that NaN (which a -flag's
// strconv.ParseFloat accepts) is refused: it compares false both ways.
func notShare(x float64) bool { return !(x >= 0 && x <= 1) }

// killsFor is session i's share of the kill budget.
func (c Config) killsFor(i int) int {
	n := c.Kills / c.Sessions
	if i < c.Kills%c.Sessions {
		n++
	}
	return n
}

// budgetFor is session i's resume budget (0: core's default). The draw
// has a generator of its own, so it changes nothing else the tree draws.
func (c Config) budgetFor(i int) int {
	if c.ResumeBudget > 0 || c.SmallBudget == 0 {
		return c.ResumeBudget
	}
	rng := stream(c.Seed, keyBudget, i)
	if rng.Float64() >= c.SmallBudget {
		return 0
	}
	return 1 + rng.IntN(2)
}

// finalAskFor reports whether session i's operator makes the ask on ahook
// final. Drawn like budgetFor, on a generator of its own.
func (c Config) finalAskFor(i int) bool {
	if c.FinalAsk == 0 {
		return false
	}
	return stream(c.Seed, keyFinalAsk, i).Float64() < c.FinalAsk
}

// Virtual time of every tree starts here (2026-01-01T00:00:00Z), so
// timestamps in the logs repeat across runs.
const start = int64(1767225600000)

// Bounds that turn a runaway tree into a reported failure instead of a
// hang: driver steps per tree and virtual time per tree.
const (
	maxSteps   = 200_000
	maxVirtual = int64(48 * time.Hour / time.Millisecond)
)
