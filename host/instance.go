package host

import (
	"context"
	"errors"
	"log/slog"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/recovery"
	"github.com/revenantrt/revenant/sqlitedb"
)

// backend starts a tree's instance on its database. The host owns
// everything around it — the index, the wake-ups, one instance per tree,
// eviction — and is the same for every backend: in-process (a
// core.Instance in this process) or guest (a wazero instance of the
// wasip1 guest, guest.go).
type backend interface {
	// start boots an instance of tree id on db (migrations, a new epoch,
	// the sweep, the re-arm through w). An instance whose sweep failed
	// still serves; the failure is sweepErr, for a wake-up delivery to
	// retry. On err nothing was started; the caller closes db.
	start(ctx context.Context, id string, db *sqlitedb.DB, w *waker, log *slog.Logger) (run instance, sweepErr, err error)
	// close releases what the backend shares between trees, after every
	// instance was closed.
	close(ctx context.Context) error
}

// instance is one running tree, whatever runs it.
type instance interface {
	// wake delivers the tree's wake-up to the running instance: the sweep,
	// then the re-arm while work remains.
	wake(ctx context.Context) error
	// idle reports whether eviction may close the instance now: no
	// execution runs in it.
	idle() bool
	// close stops the instance gracefully (shutdown recorded, claims kept).
	// ctx bounds the wait for executions to stop. The database stays open:
	// the host closes it.
	close(ctx context.Context) error
}

// native is the in-process backend: recovery.Boot on this process's
// connection, with the host's core configuration and driver.
type native struct{ h *Host }

func (b native) start(ctx context.Context, id string, db *sqlitedb.DB, w *waker, log *slog.Logger) (instance, error, error) {
	hc := core.Host{DB: db, Clock: b.h.cfg.Clock, Wake: w, IDs: b.h.cfg.IDs, Log: log}
	inst, rep, err := recovery.Boot(ctx, hc, b.h.cfg.Core, b.h.cfg.Driver)
	if inst == nil {
		return nil, nil, err
	}
	log.Debug("tree booted", "epoch", inst.Epoch(), "decisions", len(rep.Decisions))
	return nativeInstance{inst}, err, nil
}

func (native) close(context.Context) error { return nil }

// nativeInstance is a core.Instance in this process.
type nativeInstance struct{ inst *core.Instance }

func (n nativeInstance) wake(ctx context.Context) error {
	_, err := recovery.Wake(ctx, n.inst)
	return err
}

func (n nativeInstance) idle() bool                      { return n.inst.Idle() }
func (n nativeInstance) close(ctx context.Context) error { return n.inst.Close(ctx) }

// errGuestTrees is what the in-process api.Trees methods answer on a host
// whose trees run as guests: it has no core.Instance to hand out, and
// serves the API with GuestHandler instead.
var errGuestTrees = errors.New("host: trees run as wasm guests: serve the API with host.NewGuestHandler")
