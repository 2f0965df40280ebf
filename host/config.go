package host

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core"
)

// Defaults.
const (
	// DefaultIdleTimeout is how long an instance with no running execution
	// stays open after its last use.
	DefaultIdleTimeout = 5 * time.Minute
	// BootConcurrency is how many trees Open boots at once.
	BootConcurrency = 4
	// DefaultMaxOpenTrees is how many trees may have an open instance at
	// once. Each open tree holds its database (3 file handles: the file,
	// its -wal and -shm) and its instance: a few hundred KB in process,
	// about 7 MB as a guest (its wasm memory). 64 bounds that to about
	// 450 MB and 192 file handles, well within a small machine and the
	// usual 1024-handle limit, while staying above how many turns a local
	// server runs at once (a running turn keeps its tree open; idle trees
	// are closed to make room).
	DefaultMaxOpenTrees = 64
	// CapRetryAfter is the Retry-After sent with ErrTooManyOpen: turns,
	// requests and event streams that keep trees open usually end within
	// seconds.
	CapRetryAfter = 5 * time.Second
)

// Config configures a Host. Zero fields take the documented defaults; Open
// validates the rest.
type Config struct {
	// DataDir holds index.db and trees/<id>.db (REVENANT_DATA). Required;
	// created if missing.
	DataDir string
	// Core configures every tree's instance.
	Core core.Config
	// Driver runs every tree's turns. Required unless Guest is set. It is
	// shared by all trees, so it must keep no per-turn state of its own (the
	// runner keeps none).
	Driver core.Driver
	// Guest, if set, runs every tree as a WebAssembly guest (wasm/guest)
	// instead of a core.Instance in this process (wasm/backend.New gives
	// one on wazero); Core and Driver are then unused (the guest's boot
	// configuration carries its own), and the API is served by
	// NewGuestHandler. Open takes it over: Close closes it, and so does
	// an Open that fails.
	Guest GuestRuntime
	// IdleTimeout closes an instance with no running execution this long
	// after its last use (Create or Get). Zero: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxOpenTrees caps the trees with an open instance. Opening one more
	// (Create, Get, a guest's request, a wake-up's boot) first closes the
	// least recently used tree that eviction may close now (EvictIdle's
	// rules, without the wait for IdleTimeout); if none may be closed, it
	// fails with ErrTooManyOpen. Zero: DefaultMaxOpenTrees.
	MaxOpenTrees int
	// ManualEviction switches the eviction loop off; EvictIdle still steps
	// it by hand. The loop otherwise runs every IdleTimeout/2 on Clock.
	ManualEviction bool
	// Clock gives time and timers. Nil: RealClock.
	Clock core.Clock
	// IDs mints ids for every tree. Nil: RandomIDs.
	IDs core.IDSource
	// Log receives the host's and the instances' logs, each instance's with
	// its tree id. Nil discards them.
	Log *slog.Logger

	hooks hooks // tests only
}

// hooks let tests observe the host. Each is optional.
type hooks struct {
	// boot is called with the tree id just before its file is opened.
	boot func(id string)
	// delivered is called when a wake-up delivery has settled its row.
	delivered func(id string, err error)
	// waking is called as a wake-up delivery wakes the tree's running
	// instance, just before the sweep and as part of the same call, so the
	// tree is held in use exactly as long as for the sweep.
	waking func(id string)
	// found is called as a Get or a wake-up delivery has found the tree's
	// instance running, before it holds the tree: the window in which an
	// eviction may close it.
	found func(id string)
	// deleteIndex, when it returns an error, fails a delete's index write
	// with it.
	deleteIndex func(id string) error
	// released is called with the tree id when a request stops using the
	// tree (the context of a Get ended, a guest's request returned).
	released func(id string)
	// closing is called with the tree id as an operation that owns the
	// tree's entry (an eviction, a delete, the host's Close) starts to
	// close its instance.
	closing func(id string)
	// createWaits is called with the tree id as a Create starts to wait
	// for another operation that holds the id.
	createWaits func(id string)
	// vfs names the SQLite VFS every database is opened through (a
	// fault-injecting one); empty: the OS VFS.
	vfs string
}

// CheckDataDir refuses a data directory whose path, cleaned, begins with
// "file:": SQLite reads such a name as a URI (sqlitedb opens a "file:"
// name as given), so its databases would not be the files under the
// directory the host creates (REVENANT_DATA=file:x made ./file:x and
// then failed opening the URI file:x/index.db). A "file:" later in the
// path is a path like any other, and so is "FILE:x": SQLite's URI prefix
// is lower case only (it compares bytes).
func CheckDataDir(dir string) error {
	if strings.HasPrefix(filepath.Clean(dir), "file:") {
		return fmt.Errorf("data directory %q begins with \"file:\", which SQLite reads as a URI, not a path; name it another way, such as by its absolute path", dir)
	}
	return nil
}

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		return c, errors.New("data directory is not set")
	}
	if err := CheckDataDir(c.DataDir); err != nil {
		return c, err
	}
	if c.Driver == nil && c.Guest == nil {
		return c, errors.New("driver is not set")
	}
	switch {
	case c.IdleTimeout == 0:
		c.IdleTimeout = DefaultIdleTimeout
	case c.IdleTimeout < 0:
		return c, fmt.Errorf("idle timeout %v is negative", c.IdleTimeout)
	}
	switch {
	case c.MaxOpenTrees == 0:
		c.MaxOpenTrees = DefaultMaxOpenTrees
	case c.MaxOpenTrees < 0:
		return c, fmt.Errorf("max open trees %d is negative", c.MaxOpenTrees)
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.IDs == nil {
		c.IDs = RandomIDs{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// RealClock is the system clock: Now is time.Now in integer milliseconds and
// AfterFunc is time.AfterFunc.
type RealClock struct{}

// Now implements core.Clock.
func (RealClock) Now() int64 { return time.Now().UnixMilli() }

// AfterFunc implements core.Clock.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// RandomIDs mints 128-bit random ids from crypto/rand: 26 lowercase base32
// characters, safe in URLs and as tree ids (file names).
type RandomIDs struct{}

// NewID implements core.IDSource.
func (RandomIDs) NewID() string { return strings.ToLower(rand.Text()) }
