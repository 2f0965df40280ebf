package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core"
)

// Report says what one sweep decided, per session, in the order it acted.
type Report struct {
	Decisions []SessionDecision
}

// SessionDecision is one entry of a Report.
type SessionDecision struct {
	SessionID string
	core.Decision
}

// Count returns how many decisions took action a.
func (r Report) Count(a core.Action) int {
	n := 0
	for _, d := range r.Decisions {
		if d.Action == a {
			n++
		}
	}
	return n
}

// Sweep applies the policy to every claim not running here, oldest first.
// Started executions run concurrently; Sweep never waits on one. A failure on
// one session does not stop the others, except a storage failure (the tree
// is read-only, or storage refused the write for its whole schedule), which
// would only repeat; the errors are joined. It tells the instance how it
// ended (core.Instance.Swept), for the re-arm's backoff.
func Sweep(ctx context.Context, inst *core.Instance) (Report, error) {
	rep, err := sweep(ctx, inst)
	inst.Swept(err) // while sweeps fail, the re-arm backs off
	return rep, err
}

func sweep(ctx context.Context, inst *core.Instance) (Report, error) {
	// The claims are listed in one try, not on the write schedule the
	// recoveries below wait on: the listing has decided nothing, and the
	// sweep it fails is retried whole by the wake-up Wake re-arms (after
	// one failure no later than after a success, save a retry due within
	// the second: Rearm). Another connection's write lock is waited out by
	// the busy timeout first (5 s on the hosts), and a boot's sweep on the
	// wasm guest cannot wait on a timer at all: its boot export cuts such
	// a wait short (wasm/guest's bootResult), failing the sweep so that
	// the boot serves.
	claims, err := inst.Claims(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("sweep: %w", err)
	}
	policy := PolicyOf(inst)
	var rep Report
	var errs []error
	for _, c := range claims {
		if c.RunningHere {
			continue
		}
		d, err := inst.Recover(ctx, c.SessionID, policy.Decide)
		if err == nil && d.Action == core.Sleep && d.At <= inst.Clock().Now() {
			// Its write waited for storage past the retry's time: judged
			// at the write's timestamp, the turn slept. The retry is due
			// now, and this sweep starts it, in a write of its own dated
			// after that time: Rearm counts a due retry as one a sweep
			// could not start, and would arm a wake interval past it.
			d, err = inst.Recover(ctx, c.SessionID, policy.Decide)
		}
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, core.ErrReadOnly) || errors.Is(err, core.ErrStorageUnavailable) {
				// Storage takes no writes: every other claim would wait the
				// same way. The re-arm below brings the next try.
				break
			}
			continue
		}
		rep.Decisions = append(rep.Decisions, SessionDecision{SessionID: c.SessionID, Decision: d})
	}
	return rep, errors.Join(errs...)
}

// Boot opens an instance over the host's database (migrations and a new
// epoch), sweeps once, and re-arms the wake-up from durable state (DESIGN §4
// rule 3). Resumed executions are started, not awaited.
func Boot(ctx context.Context, host core.Host, cfg core.Config, driver core.Driver) (*core.Instance, Report, error) {
	return BootWith(ctx, host, cfg, driver, nil)
}

// BootWith is Boot with a step of the host's between opening and sweeping:
// opened, when not nil, runs on the open instance before the sweep, so a
// host makes ready what serving needs (the wasm guest: its API handler,
// its live-event watches, the phase it announces) before the sweep starts
// anything, and every host boots through this one sequence. An open or
// opened that fails returns a nil instance (one opened is closed); a sweep
// that fails returns the instance with the error, since it can serve and
// its wake-up retries the sweep.
func BootWith(ctx context.Context, host core.Host, cfg core.Config, driver core.Driver, opened func(*core.Instance) error) (*core.Instance, Report, error) {
	inst, err := core.Open(ctx, host, cfg, driver)
	return started(ctx, inst, err, opened)
}

// ReopenWith is BootWith over a tree whose previous instance, closed,
// stopped in this process: core.Reopen opens the new one only while
// closed still owns the tree, and fails with core.ErrFenced otherwise.
func ReopenWith(ctx context.Context, closed *core.Instance, host core.Host, cfg core.Config, driver core.Driver, opened func(*core.Instance) error) (*core.Instance, Report, error) {
	inst, err := core.Reopen(ctx, closed, host, cfg, driver)
	return started(ctx, inst, err, opened)
}

// started finishes a boot whose open returned inst and err: opened, then
// the sweep and the re-arm (BootWith).
func started(ctx context.Context, inst *core.Instance, err error, opened func(*core.Instance) error) (*core.Instance, Report, error) {
	if err != nil {
		return nil, Report{}, fmt.Errorf("boot: %w", err)
	}
	if opened != nil {
		if err := opened(inst); err != nil {
			return nil, Report{}, errors.Join(fmt.Errorf("boot: %w", err), inst.Close(context.WithoutCancel(ctx)))
		}
	}
	rep, err := Wake(ctx, inst)
	if err != nil {
		return inst, rep, fmt.Errorf("boot: %w", err)
	}
	return inst, rep, nil
}

// Wake is the wake-up handler: it sweeps and then, as its last act, re-arms
// the wake-up while any claim remains (DESIGN §4 rule 2). A delivered wake-up
// is used up, so a handler that skipped everything still re-arms. While the
// sweeps fail in a row the re-arm backs off on the wake schedule
// (core.Instance.Rearm), as the host's retry of a failed sweep does.
func Wake(ctx context.Context, inst *core.Instance) (Report, error) {
	rep, sweepErr := Sweep(ctx, inst)
	_, armErr := inst.Rearm(ctx)
	return rep, errors.Join(sweepErr, armErr)
}
