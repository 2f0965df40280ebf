package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/wasm/abi"
)

// maxPumps bounds how many times one call pumps a guest that keeps
// reporting pending work; past it the guest is treated as hung.
const maxPumps = 100_000

// Exit codes the runtime closes a guest with.
const (
	exitKilled uint32 = 0x7e57_0001
	exitClosed uint32 = 0x7e57_0002
)

// Guest is one running instance of the guest module. Its methods are
// synchronous and serialized (a mutex): each delivers one input, runs the
// guest until it is quiescent, and returns; everything the guest does
// meanwhile reaches the Services on the caller's goroutine. The runtime
// starts no goroutine of its own that touches the guest (the watchdog is
// wazero's context check), so the same calls with deterministic Services
// give the same history.
type Guest struct {
	m    *Module
	mod  api.Module
	mem  *reservedMemory // the module's memory; released once no call can run
	opts Options
	log  *slog.Logger
	fns  map[string]api.Function

	// guestMinor is the minor ABI version the guest announced; peerMinor,
	// set as Boot starts, the lower of it and the host's announced one:
	// what both sides speak (abi.EgressEnd's layout depends on it).
	guestMinor uint16

	mu        sync.Mutex // serializes calls; guards the fields below
	booted    bool
	peerMinor uint16
	broken    error // why the guest was closed; nil while usable
	finished  bool  // the module is closed and its memory released: nothing left to do

	closing atomic.Bool // Close was called, maybe from another goroutine

	// Set by imports during a call (under mu, held by the caller).
	phase    Phase
	result   []byte // the pending import result, taken by the result import
	failMsg  string
	killed   error
	nanoLast int64
	stderr   tailBuffer
	// fenced are the egress requests the epoch fence refused during the
	// running call, in order; the call delivers their ends once the export
	// returns (endFenced).
	fenced []fencedEgress
}

// fencedEgress is an egress request the epoch fence refused: its end, code
// abi.EndFenced with msg, is owed to the guest.
type fencedEgress struct {
	id  uint64
	msg string
}

type guestKey struct{}

func guestFrom(ctx context.Context) *Guest { return ctx.Value(guestKey{}).(*Guest) }

func (g *Guest) fn(name string) api.Function {
	f, ok := g.fns[name]
	if !ok {
		f = g.mod.ExportedFunction(name)
		g.fns[name] = f
	}
	return f
}

// nanotime is the WASI monotonic clock: the Services' clock, nudged forward
// by a nanosecond per read so it never stands still (the Go runtime divides
// by intervals), which stays deterministic.
func (g *Guest) nanotime() int64 {
	n := g.opts.Services.Now() * 1e6
	if n <= g.nanoLast {
		n = g.nanoLast + 1
	}
	g.nanoLast = n
	return n
}

// Phase is the phase the guest last announced.
func (g *Guest) Phase() Phase {
	g.mu.Lock()
	defer g.unlock()
	return g.phase
}

// Closed reports whether the guest was closed or failed; a closed guest
// refuses every call with ErrGuestClosed.
func (g *Guest) Closed() bool {
	if g.closing.Load() {
		return true
	}
	g.mu.Lock()
	defer g.unlock()
	return g.broken != nil
}

// Boot migrates the database, takes a new epoch, sweeps and re-arms
// (recovery.Boot), then the guest serves. A refused ABI version is
// ErrVersion (so is a configuration an older guest cannot carry, such as
// its permissions or max_subagents: checkBootFits); a failed boot is a *GuestError and the
// guest stays unbooted.
func (g *Guest) Boot(ctx context.Context, cfg BootConfig) error {
	g.mu.Lock()
	defer g.unlock()
	if cfg.HostMajor == 0 && cfg.HostMinor == 0 {
		cfg.HostMajor, cfg.HostMinor = abi.Major, abi.Minor
		if g.opts.HostVersion != 0 {
			cfg.HostMajor, cfg.HostMinor = abi.UnpackVersion(g.opts.HostVersion)
		}
	}
	if err := checkBootFits(cfg, g.guestMinor); err != nil {
		return err
	}
	// What both sides speak is known before the boot, and must be: an
	// egress the boot's sweep starts and the fence refuses has its end
	// delivered within this same call (endFenced), in the peer's layout.
	g.peerMinor = min(g.guestMinor, cfg.HostMinor)
	// The 1.3 fields go only to a guest that announced 1.3: an older
	// decoder refuses trailing bytes.
	if err := g.callData(ctx, abi.ExportBoot, nil, cfg.EncodeFor(g.guestMinor)); err != nil {
		return err
	}
	g.booted = true
	return nil
}

// checkBootFits refuses (ErrVersion) a boot configuration that a guest of
// ABI minor guestMinor would not receive, and would run differently.
//
// The permissions, before 1.4: such a guest may have no authorization
// at all (the 1.3 guests built before permissions run every tool without
// asking), so only a configuration where every tool is "allow" and no
// rule exists means the same there: anything else (a rule, a tool set to
// "deny" or "ask", or unset, which asks) it would run unasked.
//
// The operator's policy of 1.8 is refused the same way: a guest older than
// that would decide a final ask as a plain one, which a session's rules
// lift, and would let a session name any model. So is a max_subagents the
// operator set, before 1.10: such a guest would let a tree start children
// without limit (its default applies alike, but refusing every older
// guest for a default would refuse them all; backend.New warns instead).
func checkBootFits(cfg BootConfig, guestMinor uint16) error {
	if guestMinor < abi.MinorMaxSubagents && cfg.Settings.MaxSubagents != 0 {
		return fmt.Errorf("boot: the guest speaks ABI 1.%d, which does not carry max_subagents (1.%d does); rebuild the guest: %w", guestMinor, abi.MinorMaxSubagents, ErrVersion)
	}
	if guestMinor < abi.MinorOperatorPolicy {
		for i, r := range cfg.Permissions {
			if r.Final {
				return fmt.Errorf("boot: the guest speaks ABI 1.%d, which does not carry permission rule %d's final flag (1.%d does); rebuild the guest: %w", guestMinor, i, abi.MinorOperatorPolicy, ErrVersion)
			}
		}
		if cfg.AllowedModels != nil {
			return fmt.Errorf("boot: the guest speaks ABI 1.%d, which does not carry the allowed models (1.%d does); rebuild the guest: %w", guestMinor, abi.MinorOperatorPolicy, ErrVersion)
		}
	}
	if guestMinor >= abi.MinorPermissions {
		return nil
	}
	if len(cfg.Permissions) > 0 {
		return fmt.Errorf("boot: the guest speaks ABI 1.%d, which does not carry permission rules (1.%d does); rebuild the guest: %w", guestMinor, abi.MinorPermissions, ErrVersion)
	}
	for _, t := range cfg.Tools {
		if t.Permission != string(permission.Allow) {
			return fmt.Errorf("boot: the guest speaks ABI 1.%d, which does not carry tool %s's permission %q (1.%d does; only \"allow\" is safe without it); rebuild the guest: %w", guestMinor, t.Name, permissionName(t.Permission), abi.MinorPermissions, ErrVersion)
		}
	}
	return nil
}

// permissionName is a tool's permission as the operator means it: unset
// asks.
func permissionName(p string) string {
	if p == "" {
		return "ask"
	}
	return p
}

// Request delivers API request id; the response arrives through
// Services.Respond (head, body chunks, end), maybe across later calls for
// an event stream. Ids are the host's; reuse one only after its end.
func (g *Guest) Request(ctx context.Context, id uint64, req Request) error {
	g.mu.Lock()
	defer g.unlock()
	b := abi.Request{Method: req.Method, Path: req.Path, RawQuery: req.RawQuery, Header: httpmsg.Header(req.Header), Body: req.Body}.Encode()
	return g.callData(ctx, abi.ExportRequest, []uint64{id}, b)
}

// CancelRequest tells the guest the client of request id went away (an
// event stream closed); the guest ends the response.
func (g *Guest) CancelRequest(ctx context.Context, id uint64) error {
	g.mu.Lock()
	defer g.unlock()
	return g.call(ctx, abi.ExportCancelRequest, id)
}

// Wake delivers the tree's wake-up: the guest sweeps and, as its last act,
// re-arms while work remains (DESIGN §4 rule 2).
func (g *Guest) Wake(ctx context.Context) error {
	g.mu.Lock()
	defer g.unlock()
	return g.call(ctx, abi.ExportWake)
}

// Timer delivers timer id (Services.SetTimer). A cleared or unknown id is
// ignored by the guest.
func (g *Guest) Timer(ctx context.Context, id uint64) error {
	g.mu.Lock()
	defer g.unlock()
	return g.call(ctx, abi.ExportTimer, id)
}

// EgressResponse delivers the head of egress id's answer.
func (g *Guest) EgressResponse(ctx context.Context, id uint64, status int, header http.Header) error {
	g.mu.Lock()
	defer g.unlock()
	return g.callData(ctx, abi.ExportEgressResponse, []uint64{id}, abi.EgressResponse{Status: status, Header: httpmsg.Header(header)}.Encode())
}

// EgressChunk delivers the next bytes of egress id's body.
func (g *Guest) EgressChunk(ctx context.Context, id uint64, data []byte) error {
	g.mu.Lock()
	defer g.unlock()
	return g.callData(ctx, abi.ExportEgressChunk, []uint64{id}, data)
}

// EgressEnd ends egress id: the zero EgressEnd is a clean end of the body,
// anything else a failure (before the head: the request failed) with the
// most specific code the host can tell. A guest older than ABI 1.3, or
// one booted by a host announcing an older version, gets the message
// alone.
func (g *Guest) EgressEnd(ctx context.Context, id uint64, end EgressEnd) error {
	g.mu.Lock()
	defer g.unlock()
	return g.callData(ctx, abi.ExportEgressEnd, []uint64{id}, end.EncodeFor(g.peerMinor))
}

// Idle reports whether no execution runs in the guest (core.Instance.Idle:
// none runs and none is owed a storage failure), as of the end of the last
// call: closing it now loses nothing that only its memory holds (claims
// stay, and their wake-up boots a fresh guest). Requests in flight are the
// host's to count. It runs no guest goroutine. A guest older than ABI 1.1
// has no such export: ErrUnsupported.
func (g *Guest) Idle(ctx context.Context) (bool, error) {
	g.mu.Lock()
	defer g.unlock()
	if err := g.usable(abi.ExportIdle); err != nil {
		return false, err
	}
	f := g.fn(abi.ExportIdle)
	if f == nil {
		return false, fmt.Errorf("%s: %w", abi.ExportIdle, ErrUnsupported)
	}
	cctx, cancel := g.callContext(ctx)
	defer cancel()
	g.failMsg, g.killed = "", nil
	res, err := f.Call(cctx)
	if err != nil {
		return false, g.failed(abi.ExportIdle, err)
	}
	switch v := int32(res[0]); v {
	case abi.IsIdle:
		return true, nil
	case abi.NotIdle:
		return false, nil
	case int32(abi.StatusNotBooted):
		return false, fmt.Errorf("%s: %w", abi.ExportIdle, ErrNotBooted)
	default:
		return false, g.failed(abi.ExportIdle, fmt.Errorf("unknown answer %d", v))
	}
}

// DiagSQL has the guest run n statements "SELECT 1" in one transaction
// through the SQL imports (revenant_diag_sql, a diagnostic export): the
// cost of the SQL round trip through the ABI, for benchmarks. A guest
// older than ABI 1.1 has no such export: ErrUnsupported.
func (g *Guest) DiagSQL(ctx context.Context, n int) error {
	g.mu.Lock()
	defer g.unlock()
	if n < 0 || n > 1<<31-1 {
		return fmt.Errorf("%s: n %d out of range", abi.ExportDiagSQL, n)
	}
	if err := g.usable(abi.ExportDiagSQL); err != nil {
		return err
	}
	if g.fn(abi.ExportDiagSQL) == nil {
		return fmt.Errorf("%s: %w", abi.ExportDiagSQL, ErrUnsupported)
	}
	return g.call(ctx, abi.ExportDiagSQL, uint64(n))
}

// Shutdown stops the guest gracefully: running executions record
// interrupted{reason:"shutdown"} and keep their claims, event streams end.
// Close the guest afterwards.
func (g *Guest) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	defer g.unlock()
	return g.call(ctx, abi.ExportShutdown)
}

// Close kills the guest: no more guest code runs, an open transaction is
// rolled back, the memory is released. It may be called from any
// goroutine, also while a call runs: that call then fails (unless the
// guest had already returned to it), and the memory is released as it
// returns.
func (g *Guest) Close(ctx context.Context) error {
	if g.closing.Swap(true) {
		return nil
	}
	err := g.mod.CloseWithExitCode(ctx, exitClosed)
	if g.mu.TryLock() {
		g.unlock() // no call runs: this finishes the close
	}
	return err
}

// unlock ends a call (every method's deferred unlock). A Close that came
// while the mutex was held could not finish (its TryLock failed, and a
// call that had already left the guest returns normally); so after every
// unlock, the first to find closing set and the mutex free finishes it.
// Close sets closing before its TryLock, so either it gets the mutex or
// the holder it missed sees closing here.
func (g *Guest) unlock() {
	g.mu.Unlock()
	if g.closing.Load() && g.mu.TryLock() {
		g.finish(ErrGuestClosed)
		g.mu.Unlock()
	}
}

// finish ends a guest no call runs in any more, once: it records why (the
// first reason wins), rolls back the transaction it left open, closes the
// module and releases its memory. Later calls only refuse.
func (g *Guest) finish(why error) {
	if g.broken == nil {
		g.broken = why
	}
	if g.finished {
		return
	}
	g.finished = true
	g.rollback()
	if !g.mod.IsClosed() {
		_ = g.mod.CloseWithExitCode(context.Background(), exitClosed)
	}
	g.m.forget(weak.Make(g))
}

// callData copies data into guest memory and calls export(params…, ptr, len).
func (g *Guest) callData(ctx context.Context, export string, params []uint64, data []byte) error {
	if err := g.usable(export); err != nil {
		return err
	}
	cctx, cancel := g.callContext(ctx)
	defer cancel()
	return g.endFenced(cctx, g.runData(cctx, export, params, data))
}

func (g *Guest) call(ctx context.Context, export string, params ...uint64) error {
	if err := g.usable(export); err != nil {
		return err
	}
	cctx, cancel := g.callContext(ctx)
	defer cancel()
	return g.endFenced(cctx, g.run(cctx, export, params))
}

// runData copies data into guest memory and runs export(params…, ptr, len).
func (g *Guest) runData(ctx context.Context, export string, params []uint64, data []byte) error {
	var ptr uint32
	if len(data) > 0 {
		res, err := g.fn(abi.ExportAlloc).Call(ctx, uint64(len(data)))
		if err != nil {
			return g.failed(export, err)
		}
		ptr = uint32(res[0])
		if !g.mod.Memory().Write(ptr, data) {
			return g.failed(export, fmt.Errorf("write %d bytes at %#x: out of range", len(data), ptr))
		}
	}
	params = append(params, uint64(ptr), uint64(len(data)))
	return g.run(ctx, export, params)
}

// endFenced delivers the ends of the egress requests the epoch fence
// refused (imports.go) through revenant_egress_end, in the order they were
// refused, once the export that made them has returned: exports are never
// re-entered, and the runtime has no goroutine of its own, so the end
// comes within the same Guest call, deterministically. A guest that starts
// another request while taking an end has that one's end delivered too.
// err is the export's own result, which wins over an end's unless
// delivering the end killed the guest.
func (g *Guest) endFenced(ctx context.Context, err error) error {
	for n := 0; len(g.fenced) > 0; n++ {
		if g.broken != nil {
			break // dead: its egress died with it
		}
		if n == maxPumps {
			g.fenced = nil
			return g.failed(abi.ExportEgressEnd, fmt.Errorf("still starting fenced egress after %d ends: %w", maxPumps, ErrWatchdog))
		}
		f := g.fenced[0]
		g.fenced = g.fenced[1:]
		end := abi.EgressEnd{Code: abi.EndFenced, Message: f.msg}
		endErr := g.runData(ctx, abi.ExportEgressEnd, []uint64{f.id}, end.EncodeFor(g.peerMinor))
		switch {
		case endErr == nil:
		case g.broken != nil:
			err = endErr
		case err == nil:
			err = endErr
		}
	}
	g.fenced = nil
	return err
}

func (g *Guest) usable(export string) error {
	if g.broken != nil || g.closing.Load() {
		return fmt.Errorf("%s: %w", export, ErrGuestClosed)
	}
	if !g.booted && export != abi.ExportBoot {
		return fmt.Errorf("%s: %w", export, ErrNotBooted)
	}
	return nil
}

func (g *Guest) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, guestKey{}, g)
	wd := g.opts.Watchdog
	if wd == 0 {
		wd = DefaultWatchdog
	}
	if wd < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, wd)
}

// run calls the export, then pumps while the guest reports pending work.
func (g *Guest) run(ctx context.Context, export string, params []uint64) error {
	g.failMsg, g.killed = "", nil
	res, err := g.fn(export).Call(ctx, params...)
	if err = overran(ctx, err); err != nil {
		return g.failed(export, err)
	}
	status := abi.Status(int32(res[0]))
	for n := 0; status == abi.StatusPending; n++ {
		if n == maxPumps {
			return g.failed(export, fmt.Errorf("never quiescent after %d pumps: %w", maxPumps, ErrWatchdog))
		}
		if res, err = g.fn(abi.ExportPump).Call(ctx); err != nil {
			return g.failed(export, err)
		}
		if err = overran(ctx, nil); err != nil {
			return g.failed(export, err)
		}
		status = abi.Status(int32(res[0]))
	}
	switch status {
	case abi.StatusIdle:
		return nil
	case abi.StatusError:
		return &GuestError{Export: export, Msg: g.failMsg}
	case abi.StatusVersion:
		return fmt.Errorf("%s: %s: %w", export, g.failMsg, ErrVersion)
	case abi.StatusNotBooted:
		return fmt.Errorf("%s: %w", export, ErrNotBooted)
	}
	return g.failed(export, fmt.Errorf("unknown status %d", status))
}

// overran is a call's error, or for a call that returned past its
// watchdog one wrapping ErrWatchdog: a call past the bound is a trap
// (docs/abi.md), though the guest reached no import to stop at.
func overran(ctx context.Context, err error) error {
	if err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("returned past its watchdog: %w", ErrWatchdog)
	}
	return err
}

// failed closes the guest after a call died and says why.
func (g *Guest) failed(export string, err error) error {
	var kind error
	var exit *sys.ExitError
	switch {
	case g.killed != nil:
		kind = ErrKilled
		err = g.killed
	case errors.Is(err, ErrWatchdog):
		kind = ErrWatchdog
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		kind = ErrWatchdog
	case g.closing.Load():
		kind = ErrGuestClosed
	default:
		kind = ErrTrapped
	}
	g.broken = kind // this call's failure is why, even after a Close
	g.finish(kind)  // the call returned: no guest code runs any more
	g.log.Warn("wasm guest failed; it must be replaced", "export", export, "err", err, "stderr", g.stderr.String())
	return fmt.Errorf("%s: %w: %w%s", export, kind, err, g.stderr.tail())
}

// rollback ends a transaction a dead guest left open on the Conn.
func (g *Guest) rollback() {
	if g.opts.Conn.InTx() {
		if err := g.opts.Conn.Rollback(); err != nil {
			g.log.Warn("roll back the dead guest's transaction", "err", err)
		}
	}
}

// tailBuffer keeps the last bytes the guest wrote to stdout and stderr (a Go
// panic's message), for the error of a trapped call.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 8 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func (t *tailBuffer) tail() string {
	s := strings.TrimSpace(t.String())
	if s == "" {
		return ""
	}
	// A Go crash report is "panic: …" (or "fatal error: …"), a blank line,
	// then the goroutine trace: it is kept from its first line, or its
	// message would be cut off with the paragraph before the trace. Other
	// output keeps its last paragraph.
	if i := crashReportStart(s); i >= 0 {
		s = s[i:]
	} else if i := strings.LastIndex(s, "\n\n"); i > 0 && len(s)-i < 2048 {
		s = s[i:]
	}
	if len(s) > 2048 {
		s = s[:2048]
	}
	return " (guest output: " + s + ")"
}

// crashReportStart is where the last Go crash report in s begins: the
// last line that starts "panic: " or "fatal error: ", or -1.
func crashReportStart(s string) int {
	start := -1
	for _, head := range []string{"panic: ", "fatal error: "} {
		for i := strings.LastIndex(s, head); i >= 0; i = strings.LastIndex(s[:i], head) {
			if i == 0 || s[i-1] == '\n' {
				start = max(start, i)
				break
			}
		}
	}
	return start
}

var _ = time.Second
