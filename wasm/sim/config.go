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
	// ResumeBudget is the guests' resume budget; 0 means core's default.
	ResumeBudget int
	// Zombies is the share (0…1) of sessions that get a zombie: an
	// instance abandoned mid-turn that keeps running on its own connection
	// after its successor booted.
	Zombies float64
	// DiskFull is the share (0…1) of sessions whose disk fills for a few
	// windows of virtual time (internal/faultvfs): every write fails with
	// SQLITE_FULL or an IOERR while a window is open.
	DiskFull float64
	// CacheDir keeps the guest's compiled code between runs ("" memory).
	CacheDir string
	// Progress, when not nil, hears how a campaign is going (sessions
	// done, kills and violations so far) every tenth of the sessions and
	// at least every ProgressEvery of wall time (default 5 s) while
	// sessions end. It is no part of the history.
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Defaults of the default campaign (make simulate).
const (
	DefaultSessions = 200
	DefaultKills    = 2100
	DefaultZombies  = 0.5
	DefaultDiskFull = 0.25
)

// DefaultConfig is the default campaign for a seed.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Sessions: DefaultSessions, Kills: DefaultKills, Zombies: DefaultZombies, DiskFull: DefaultDiskFull}
}

func (c Config) validate() error {
	switch {
	case c.Sessions <= 0:
		return fmt.Errorf("sessions %d must be positive", c.Sessions)
	case c.Kills < 0:
		return fmt.Errorf("kills %d must not be negative", c.Kills)
	case c.Zombies < 0 || c.Zombies > 1:
		return fmt.Errorf("zombie share %v must be within 0…1", c.Zombies)
	case c.DiskFull < 0 || c.DiskFull > 1:
		return fmt.Errorf("disk-full share %v must be within 0…1", c.DiskFull)
	case c.ResumeBudget < 0:
		return fmt.Errorf("resume budget %d must not be negative", c.ResumeBudget)
	}
	return nil
}

// killsFor is session i's share of the kill budget.
func (c Config) killsFor(i int) int {
	n := c.Kills / c.Sessions
	if i < c.Kills%c.Sessions {
		n++
	}
	return n
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
