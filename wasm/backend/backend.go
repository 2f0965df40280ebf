package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// Config is what every tree's guest runs with.
type Config struct {
	// Wasm is the guest module (make guest: bin/revenant.wasm). Required.
	// It is compiled once, by New, for every tree.
	Wasm []byte
	// CacheDir keeps wazero's compiled code between runs, so only the
	// first start over it compiles (seconds); created if missing. "":
	// compiled code stays in memory.
	CacheDir string
	// Boot is what every tree's guest boots with; TreeID is set per tree.
	// Boot.API.Tokens must name the same principals as the Authenticator
	// given to host.NewGuestHandler (use host.HashTokens: no token enters a
	// guest).
	Boot runtime.BootConfig
	// Model is the provider's side that stays on the host (its key).
	Model serve.ModelEgress
	// Tools are the host's real tools, run for the guests' tool egress;
	// Boot.Tools should be serve.Declare(Tools).
	Tools []tool.Tool
	// Watchdog bounds one guest call (runtime.Options.Watchdog). Zero:
	// runtime.DefaultWatchdog.
	Watchdog time.Duration
	// Log receives the compilation's log line and the guest's start-up
	// warnings (runtime.Module.BootWarnings). Nil discards them.
	Log *slog.Logger
}

// Runtime starts trees as wazero guests of one compiled module.
type Runtime struct {
	cfg Config
	mod *runtime.Module
}

var _ host.GuestRuntime = (*Runtime)(nil)

// New compiles cfg.Wasm (or reads it from cfg.CacheDir), refuses a guest
// whose ABI version cannot carry cfg.Boot (runtime.Module.CheckBoot), and
// logs what such a guest lacks of the defaults (runtime.Module.BootWarnings).
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if len(cfg.Wasm) == 0 {
		return nil, errors.New("guest: no wasm module")
	}
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("guest: compilation cache: %w", err)
		}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	mod, err := runtime.Compile(ctx, cfg.Wasm, runtime.CompileOptions{CacheDir: cfg.CacheDir})
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	// A guest too old for the configuration would fail every tree's boot
	// (500 on every request, wake-ups retried for ever): refuse now.
	if err := mod.CheckBoot(ctx, cfg.Boot); err != nil {
		return nil, errors.Join(fmt.Errorf("guest: %w", err), mod.Close(ctx))
	}
	log.Info("guest module ready", "bytes", len(cfg.Wasm), "cache", cfg.CacheDir, "took", time.Since(start).Round(time.Millisecond))
	for _, w := range mod.BootWarnings(ctx) {
		log.Warn(w)
	}
	return &Runtime{cfg: cfg, mod: mod}, nil
}

// StartTree implements host.GuestRuntime: a serve.Tree on conn, whose
// every wake-up arm goes to arm and which delivers none itself.
func (r *Runtime) StartTree(ctx context.Context, id string, conn *sqlitedb.Conn, arm func(at int64) error, log *slog.Logger) (host.GuestTree, error) {
	boot := r.cfg.Boot
	boot.TreeID = id
	t, err := serve.Start(ctx, serve.Config{Module: r.mod, Conn: conn, Boot: boot, Model: r.cfg.Model, Tools: r.cfg.Tools,
		ArmWake: arm, Watchdog: r.cfg.Watchdog, Log: log})
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return t, nil
}

// Close implements host.GuestRuntime: the compiled module is released.
func (r *Runtime) Close(ctx context.Context) error {
	if err := r.mod.Close(ctx); err != nil {
		return fmt.Errorf("close module: %w", err)
	}
	return nil
}
