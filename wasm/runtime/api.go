package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// CompileOptions tune Compile.
type CompileOptions struct {
	// CacheDir keeps compiled code on disk between processes; "" keeps it
	// in memory for the life of the Module.
	CacheDir string
	// Interruptible makes a guest stoppable anywhere (wazero's
	// close-on-context-done: a check at every loop header and function
	// entry), for a host running a guest it does not trust to call it.
	// It makes guest code several times slower: Go's wasm output loops in
	// every function, and each check leaves the compiled code. Without it
	// the watchdog and Close stop a guest at its next revenant import, and
	// a call that returns past its watchdog fails with ErrWatchdog all the
	// same; only a guest looping without ever calling the host runs on.
	Interruptible bool
}

// Options configure one guest instance.
type Options struct {
	// Conn is the host-owned connection to the tree's database. It outlives
	// instances: after a kill the next guest boots on the same Conn (the
	// runtime rolls back any transaction the dead guest left open). Required.
	Conn Conn
	// Services is the host side of the imports; its methods are called
	// synchronously, on the caller's goroutine, during guest calls. Required.
	Services Services
	// Interpose, if set, is called before and after the operation of every
	// revenant import (not WASI ones). A non-nil error kills the guest right
	// there: the instance is closed and the running call returns an error
	// wrapping ErrKilled. After a kill "after" a sql_commit, the commit is
	// durable although the guest never learnt it.
	Interpose func(Site) error
	// Watchdog bounds the wall-clock time of one guest call (a guest in an
	// endless loop); past it the instance is closed and the call returns an
	// error wrapping ErrWatchdog: at the guest's next import, or as the
	// call returns (CompileOptions.Interruptible: at once). Zero: DefaultWatchdog; negative: none
	// (a simulator that wants no wall clock anywhere).
	Watchdog time.Duration
	// Log receives the guest's logs (the log import) and the runtime's.
	// Nil discards them.
	Log *slog.Logger
	// HostVersion overrides the ABI version the host announces at boot.
	// Zero announces abi.Major.abi.Minor; tests use it to check the guest
	// refuses an unknown major version.
	HostVersion uint32
}

// DefaultWatchdog is the wall-clock bound of one guest call.
const DefaultWatchdog = 30 * time.Second

// Phase is where the guest is: booting (migrations, the new epoch),
// sweeping (boot or wake sweep and re-arm), or serving.
type Phase = abi.Phase

// Phases.
const (
	PhaseNone  = abi.PhaseNone
	PhaseBoot  = abi.PhaseBoot
	PhaseSweep = abi.PhaseSweep
	PhaseServe = abi.PhaseServe
)

// Site is one point where Interpose may kill the guest: before or after the
// operation of the import named Import (abi.ImportSQLCommit, …), in Phase.
type Site struct {
	Import string
	After  bool
	Phase  Phase
}

// Conn is a connection to one tree's database with explicit transactions:
// the guest drives BEGIN, statements and COMMIT through imports. Failures
// carry the SQLite extended code as a *storage.Error, which is what crosses
// the ABI (the guest classifies transient failures by code).
type Conn interface {
	// Begin starts a write transaction (BEGIN IMMEDIATE).
	Begin() error
	// Exec runs a statement and reports the rows it changed.
	Exec(query string, args []any) (int64, error)
	// Query runs a statement and returns every row.
	Query(query string, args []any) (*storage.Rows, error)
	// Commit commits. A failed commit may leave the transaction open
	// (BUSY): InTx says so, and the guest rolls back.
	Commit() error
	// Rollback rolls back an open transaction; without one it does nothing.
	Rollback() error
	// InTx reports whether a transaction is open.
	InTx() bool
}

// Services is the host side of the guest's imports. Every method is called
// synchronously during a guest call and must not call back into the Guest.
// A host that wants identical histories from the same inputs makes these
// deterministic (a virtual clock, seeded randomness).
type Services interface {
	// Now is the time in ms since the Unix epoch. It also drives the WASI
	// clocks the Go runtime reads, so no real time leaks into the guest.
	Now() int64
	// SetTimer asks for Guest.Timer(id) at or after at (ms). An id is set
	// once; ClearTimer forgets it (it may already have fired).
	SetTimer(id uint64, at int64)
	ClearTimer(id uint64)
	// ArmWake makes sure the tree's wake-up fires no later than at (ms):
	// an earlier armed time stays. The host then calls Guest.Wake, or boots
	// a fresh guest if none runs. ClearWake forgets it. An error means the
	// wake-up was not stored: the guest's wake_arm_checked answers its
	// storage code (its write is then retried like any storage failure),
	// or "database closed" for an error wrapping storage.ErrClosed (the
	// tree was deleted or its host is stopping), as the SQL imports answer
	// on the tree's closed connection; the older wake_arm import traps the
	// guest.
	ArmWake(at int64) error
	ClearWake()
	// StartEgress starts an outbound request; the host answers later with
	// Guest.EgressResponse, EgressChunk… and exactly one EgressEnd, unless
	// CancelEgress(id) came first (then it sends nothing more for id).
	// It is not called for a request the epoch fence refuses: a guest
	// whose instance no longer holds the tree's epoch (superseded by a
	// newer boot, a zombie) or holds none yet. The runtime itself ends
	// such a request with an error, within the same Guest call.
	StartEgress(id uint64, req EgressRequest)
	CancelEgress(id uint64)
	// Emit receives every durable event after its transaction committed,
	// in commit order, and every live delta.
	Emit(ev Emitted)
	// Respond receives the parts of the response to request id: one head,
	// body chunks as the handler flushes (an event stream streams), one end.
	Respond(id uint64, part ResponsePart)
	// Random fills p with random bytes: the guest's ids and the Go
	// runtime's seeds.
	Random(p []byte)
}

// Message types crossing the ABI, shared with the guest (package abi).
type (
	// BootConfig is what a guest serves its tree with; see abi.BootConfig.
	BootConfig = abi.BootConfig
	// EgressRequest is an outbound request; see abi.EgressRequest.
	EgressRequest = abi.EgressRequest
	// EgressEnd ends an egress answer, with a code when it failed; see
	// abi.EgressEnd.
	EgressEnd = abi.EgressEnd
	// Emitted is an event leaving the guest; see abi.Emitted.
	Emitted = abi.Emitted
	// ResponsePart is a piece of an API response; see abi.ResponsePart.
	ResponsePart = abi.ResponsePart
)

// Request is one API request for the guest's handler.
type Request struct {
	Method   string
	Path     string // escaped, such as /v1/sessions/abc/events
	RawQuery string
	Header   http.Header
	Body     []byte
}

// Errors of guest calls. After any of ErrKilled, ErrWatchdog or ErrTrapped
// the guest is closed; every later call returns ErrGuestClosed.
var (
	// ErrKilled: Interpose killed the guest at an import.
	ErrKilled = errors.New("wasm guest killed")
	// ErrWatchdog: a guest call ran past the watchdog.
	ErrWatchdog = errors.New("wasm guest call ran past the watchdog")
	// ErrTrapped: the guest trapped, panicked or exited.
	ErrTrapped = errors.New("wasm guest trapped")
	// ErrGuestClosed: the guest was closed (or failed before); boot a fresh
	// one with Module.Instantiate.
	ErrGuestClosed = errors.New("wasm guest is closed; instantiate and boot a fresh one")
	// ErrVersion: the guest refused the host's ABI version, or the host the
	// guest's.
	ErrVersion = errors.New("wasm guest and host ABI versions differ")
	// ErrNotBooted: a call other than Boot before a successful Boot.
	ErrNotBooted = errors.New("wasm guest is not booted")
	// ErrUnsupported: the guest lacks an export of a later ABI minor
	// version (Idle, DiagSQL); it wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("wasm guest lacks the export (an older ABI minor version): %w", errors.ErrUnsupported)
)

// GuestError is a failure the guest reported for one call (a failed boot,
// a malformed input) without dying: the guest stays usable.
type GuestError struct {
	Export string
	Msg    string
}

func (e *GuestError) Error() string { return "wasm guest: " + e.Export + ": " + e.Msg }
