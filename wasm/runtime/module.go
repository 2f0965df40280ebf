package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/revenantrt/revenant/wasm/abi"
)

// Module is a compiled guest: compile once, instantiate many guests. It is
// safe for concurrent use.
type Module struct {
	r        wazero.Runtime
	compiled wazero.CompiledModule
	seq      atomic.Uint64 // names instances uniquely within the runtime

	// reserved counts the guests' memory mappings not yet unmapped
	// (memory_linux.go): what a leak would keep.
	reserved atomic.Int64

	mu sync.Mutex // guards guests
	// guests are the instances whose memory is not yet released, weakly:
	// Close closes them, and a dropped one's cleanup forgets it.
	guests map[weak.Pointer[Guest]]*reservedMemory

	probeMu sync.Mutex // guards the fields below (GuestMinor)
	probed  bool       // minor was read
	minor   uint16     // the ABI minor version the guests announce
}

// Compile compiles the guest's .wasm and prepares the host modules (WASI and
// revenant's imports). The returned Module owns a wazero runtime; close it
// after every guest.
func Compile(ctx context.Context, wasm []byte, opts CompileOptions) (*Module, error) {
	var cache wazero.CompilationCache
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("compile guest: cache: %w", err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	// Close-on-context-done stops a guest stuck in a loop anywhere, at the
	// price of a call out of the compiled code at every loop header: Go's
	// wasm code runs 7-18 times slower with it (docs/RATIONALE.md, "A lean
	// guest"). Without it the imports stop the guest (interrupted).
	cfg := wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(opts.Interruptible)
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("compile guest: wasi: %w", err)
	}
	if err := instantiateImports(ctx, r); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("compile guest: imports: %w", err)
	}
	// One data segment instead of Go's tens of thousands: the same memory,
	// for less than half the cost of each instantiation (dataseg.go).
	compiled, err := r.CompileModule(ctx, coalesceData(wasm))
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("compile guest: %w", err)
	}
	for _, name := range []string{abi.ExportVersion, abi.ExportAlloc, abi.ExportBoot, abi.ExportRequest, abi.ExportPump} {
		if _, ok := compiled.ExportedFunctions()[name]; !ok {
			r.Close(ctx)
			return nil, fmt.Errorf("compile guest: no export %s: not a revenant guest", name)
		}
	}
	return &Module{r: r, compiled: compiled, guests: map[weak.Pointer[Guest]]*reservedMemory{}}, nil
}

// Close closes the guests still open (Guest.Close: the memory of one whose
// call is running is released as that call returns), then releases the
// runtime. Close it after every call has returned: the runtime's compiled
// code goes with it.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	keys := slices.Collect(maps.Keys(m.guests))
	m.mu.Unlock()
	for _, k := range keys {
		if g := k.Value(); g != nil {
			_ = g.Close(ctx)
		} else {
			m.forget(k) // dropped, its cleanup not yet run
		}
	}
	return m.r.Close(ctx)
}

// forget releases the memory of guest k once, whoever asks first: its
// Close or failed call, Module.Close, or the cleanup of a dropped guest,
// which may run concurrently.
func (m *Module) forget(k weak.Pointer[Guest]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mem, ok := m.guests[k]; ok {
		delete(m.guests, k)
		mem.release()
	}
}

// Instantiate starts a guest instance (the Go runtime's _initialize runs
// now) and checks its ABI version. The guest serves nothing until Boot.
func (m *Module) Instantiate(ctx context.Context, opts Options) (*Guest, error) {
	if opts.Conn == nil || opts.Services == nil {
		return nil, fmt.Errorf("instantiate guest: Conn and Services are required")
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guest{m: m, opts: opts, log: log, fns: map[string]api.Function{}}
	s := opts.Services
	cfg := wazero.NewModuleConfig().
		WithName(fmt.Sprintf("revenant-guest-%d", m.seq.Add(1))).
		WithStartFunctions("_initialize").
		WithStdout(&g.stderr).
		WithStderr(&g.stderr).
		// Every clock and every random byte the Go runtime reads comes from
		// the Services, so a virtual clock and a seed fix the whole run.
		WithWalltime(func() (int64, int32) {
			ms := s.Now()
			return ms / 1000, int32(ms%1000) * 1e6
		}, sys.ClockResolution(1e6)).
		WithNanotime(g.nanotime, sys.ClockResolution(1)).
		WithNanosleep(func(int64) {}).
		WithOsyield(func() {}).
		WithRandSource(randReader{s})
	cctx := context.WithValue(ctx, guestKey{}, g)
	alloc, mem := newMemoryAllocator(&m.reserved)
	if alloc != nil {
		cctx = experimental.WithMemoryAllocator(cctx, alloc)
	}
	mod, err := m.r.InstantiateModule(cctx, m.compiled, cfg)
	if err != nil {
		mem.release()
		return nil, fmt.Errorf("instantiate guest: %w%s", err, g.stderr.tail())
	}
	g.mod, g.mem = mod, mem
	res, err := g.fn(abi.ExportVersion).Call(cctx)
	if err != nil {
		mod.Close(ctx)
		mem.release()
		return nil, fmt.Errorf("instantiate guest: read ABI version: %w", err)
	}
	major, minor := abi.UnpackVersion(uint32(res[0]))
	if major != abi.Major {
		mod.Close(ctx)
		mem.release()
		return nil, fmt.Errorf("instantiate guest: guest ABI %d.%d, host %d.%d: %w", major, minor, abi.Major, abi.Minor, ErrVersion)
	}
	g.guestMinor = minor
	m.mu.Lock()
	m.guests[weak.Make(g)] = mem
	m.mu.Unlock()
	// A guest dropped without Close still gives its memory back.
	goruntime.AddCleanup(g, m.forget, weak.Make(g))
	return g, nil
}

type randReader struct{ s Services }

func (r randReader) Read(p []byte) (int, error) {
	r.s.Random(p)
	return len(p), nil
}

var _ io.Reader = randReader{}
