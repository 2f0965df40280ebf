package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// GuestConfig configures the guest backend (Config.Guest): every active
// tree is one instance of the wasip1 guest, driven by wasm/runtime/serve,
// on a database connection the host owns (it outlives guest instances:
// a guest that dies is replaced on the same connection at the next use).
type GuestConfig struct {
	// Wasm is the guest module (make guest: bin/revenant.wasm). Required.
	// It is compiled once, at Open, for every tree.
	Wasm []byte
	// CacheDir keeps wazero's compiled code between runs, so only the
	// first Open over a data directory compiles (seconds). "":
	// <DataDir>/wasm-cache.
	CacheDir string
	// Boot is what every tree's guest boots with; TreeID is set per tree.
	// Boot.API.Tokens must name the same principals as the Authenticator
	// given to NewGuestHandler (use HashTokens: no token enters a guest).
	Boot runtime.BootConfig
	// Model is the provider's side that stays on the host (its key).
	Model serve.ModelEgress
	// Tools are the host's real tools, run for the guests' tool egress;
	// Boot.Tools should be serve.Declare(Tools).
	Tools []tool.Tool
	// Watchdog bounds one guest call (runtime.Options.Watchdog). Zero:
	// runtime.DefaultWatchdog.
	Watchdog time.Duration
}

// guestBackend starts trees as wazero guests of one compiled module.
type guestBackend struct {
	cfg GuestConfig
	mod *runtime.Module
}

func newGuestBackend(ctx context.Context, h *Host, cfg GuestConfig) (*guestBackend, error) {
	if len(cfg.Wasm) == 0 {
		return nil, errors.New("guest: no wasm module")
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(h.cfg.DataDir, "wasm-cache")
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("guest: compilation cache: %w", err)
	}
	start := time.Now()
	mod, err := runtime.Compile(ctx, cfg.Wasm, runtime.CompileOptions{CacheDir: cfg.CacheDir})
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	h.log.Info("guest module ready", "bytes", len(cfg.Wasm), "cache", cfg.CacheDir, "took", time.Since(start).Round(time.Millisecond))
	return &guestBackend{cfg: cfg, mod: mod}, nil
}

func (b *guestBackend) start(ctx context.Context, id string, db *sqlitedb.DB, w *waker, log *slog.Logger) (instance, error, error) {
	boot := b.cfg.Boot
	boot.TreeID = id
	t, err := serve.Start(ctx, serve.Config{Module: b.mod, Conn: db.Conn(), Boot: boot, Model: b.cfg.Model, Tools: b.cfg.Tools,
		ArmWake: storeWake(w), Watchdog: b.cfg.Watchdog, Log: log})
	if err != nil {
		return nil, nil, err
	}
	return &guestInstance{tree: t, w: w}, nil, nil
}

func (b *guestBackend) close(ctx context.Context) error {
	if err := b.mod.Close(ctx); err != nil {
		return fmt.Errorf("guest: close module: %w", err)
	}
	return nil
}

// storeWake is the guest's wake_arm: the row is stored durably (waker.Arm)
// before the import returns, so before the guest commits the claim it
// arms for (DESIGN §4 rule 1). If it cannot be stored, the guest must not
// go on: the panic fails the guest's call, the runtime rolls back its
// transaction and the next use boots a fresh guest, which re-arms from
// durable state (rule 3). A clear (0) is the guest deleting its tree; the
// host's Delete removes the row itself. The waker's timer delivers the
// wake-up (serve has none), so each is delivered once.
func storeWake(w *waker) func(at int64) {
	return func(at int64) {
		if at == 0 {
			return
		}
		if err := w.Arm(context.Background(), at); err != nil {
			panic(fmt.Errorf("store the guest's wake-up: %w", err))
		}
	}
}

// guestInstance is a tree served by a wazero guest.
type guestInstance struct {
	tree *serve.Tree
	w    *waker
}

func (g *guestInstance) wake(ctx context.Context) error { return g.tree.Wake(ctx) }

// idle is the in-process rule: no execution runs in the guest
// (serve.Tree.Idle asks it, core.Instance.Idle inside) and no request is
// in flight (the Tree's own, and the host's entry.inflight, checked by
// EvictIdle). Claims may remain: their wake-up row boots the tree again.
// A tree whose wake-up is being delivered is busy for that moment (the
// delivery would fail on the closed tree and wait for its retry). A guest
// that cannot answer (one older than ABI 1.1) falls back to the wake-up:
// without a row no claim exists, so no execution runs.
func (g *guestInstance) idle() bool {
	if g.w.inDelivery() {
		return false
	}
	idle, err := g.tree.Idle(context.Background())
	if err != nil {
		return !g.w.pending()
	}
	return idle
}

func (g *guestInstance) close(ctx context.Context) error { return g.tree.Close(ctx) }

// abandon closes the guest after the host closed its database: its
// shutdown cannot write anything.
func (g *guestInstance) abandon() { _ = g.tree.Close(context.Background()) }

// inDelivery reports whether the wake-up is being delivered.
func (w *waker) inDelivery() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.delivering
}

// pending reports whether the wake-up is armed or being delivered.
func (w *waker) pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.row != 0 || w.delivering
}

// acquire returns the tree's running guest, booting it if needed, and
// keeps it from eviction until release is called.
func (h *Host) acquire(ctx context.Context, id string) (*guestInstance, func(), error) {
	for {
		e, _, err := h.activate(ctx, id, true)
		if err != nil {
			return nil, nil, err
		}
		h.mu.Lock()
		if h.trees[id] != e || e.busy != nil {
			h.mu.Unlock()
			continue // evicted or deleted since: look again
		}
		g, ok := e.run.(*guestInstance)
		if !ok {
			h.mu.Unlock()
			return nil, nil, fmt.Errorf("tree %s: not a guest", id)
		}
		e.inflight++
		h.mu.Unlock()
		release := func() {
			h.mu.Lock()
			e.inflight--
			e.lastUsed = h.cfg.Clock.Now()
			h.mu.Unlock()
		}
		return g, release, nil
	}
}
