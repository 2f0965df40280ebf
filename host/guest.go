package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
)

// GuestRuntime runs trees as WebAssembly guests (Config.Guest). host/
// defines it and imports no wasm package: the wazero implementation is
// wasm/backend, which cmd/revenant wires in. The host owns everything
// around a guest — the tree's connection, its wake-up, one guest per
// tree, eviction — exactly as for an in-process instance.
type GuestRuntime interface {
	// StartTree boots tree id's guest on conn, the tree's connection,
	// which the host owns and closes: it outlives the guest. arm is the
	// guest's wake_arm, called with the time each time the guest arms (0: the
	// guest cleared it, deleting its tree); the host stores the wake-up
	// and delivers it with GuestTree.Wake, or returns why it could not
	// (the guest's write then fails and is retried, as in process). The
	// runtime delivers none itself. On error nothing runs.
	StartTree(ctx context.Context, id string, conn *sqlitedb.Conn, arm func(at int64) error, log *slog.Logger) (GuestTree, error)
	// Close releases what the trees share (the compiled module), after
	// every tree was closed.
	Close(ctx context.Context) error
}

// GuestTree is one tree's running guest. A guest that dies is replaced
// on the same connection at its next use; the GuestTree stays.
type GuestTree interface {
	// ServeHTTP serves one API request of the tree, streaming the answer.
	http.Handler
	// Wake delivers the tree's wake-up: the guest sweeps and re-arms
	// while work remains.
	Wake(ctx context.Context) error
	// Idle reports whether no execution runs in the guest and no request
	// is in flight. An error means it cannot tell (a guest older than ABI
	// 1.1).
	Idle(ctx context.Context) (bool, error)
	// Close stops the guest gracefully (shutdown recorded, claims kept).
	Close(ctx context.Context) error
}

// guestBackend starts trees on a GuestRuntime.
type guestBackend struct{ rt GuestRuntime }

func (b guestBackend) start(ctx context.Context, id string, db *sqlitedb.DB, w *waker, log *slog.Logger) (instance, error, error) {
	t, err := b.rt.StartTree(ctx, id, db.Conn(), storeWake(w), log)
	if err != nil {
		return nil, nil, err
	}
	return &guestInstance{tree: t, w: w}, nil, nil
}

func (b guestBackend) close(ctx context.Context) error {
	if err := b.rt.Close(ctx); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	return nil
}

// storeWake is the guest's wake_arm: the row is stored durably (waker.Arm)
// before the import returns, so before the guest commits the claim it
// arms for (DESIGN §4 rule 1). If it cannot be stored, the error goes back
// to the guest (wake_arm_checked answers its storage code): core's write
// fails that attempt before its transaction and retries it, arming again,
// on the write schedule, exactly as waker.Arm's error does in process. A
// clear (0) is the guest deleting its tree; the host's Delete removes the
// row itself. The waker's timer delivers the wake-up (the runtime has
// none), so each is delivered once.
//
// A deleted tree's arm (api.ErrTreeNotFound, the waker retired) reaches the
// guest as its storage closed (storage.ErrClosed), which is what its SQL
// imports meet on the deleted tree's closed connection: the request that
// armed answers 503 like any request a delete cut short, and its retry
// finds the tree gone (404), not a 500 for an unknown storage failure.
func storeWake(w *waker) func(at int64) error {
	return func(at int64) error {
		if at == 0 {
			return nil
		}
		err := w.Arm(context.Background(), at)
		if errors.Is(err, api.ErrTreeNotFound) {
			return fmt.Errorf("%w: %w", err, storage.ErrClosed)
		}
		return err
	}
}

// guestInstance is a tree served by a wazero guest.
type guestInstance struct {
	tree GuestTree
	w    *waker
}

func (g *guestInstance) wake(ctx context.Context) error { return g.tree.Wake(ctx) }

// idle is the in-process rule: no execution runs in the guest
// (GuestTree.Idle asks it, core.Instance.Idle inside) and no request is
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
		if !h.hold(e) {
			continue // evicted or deleted since: look again
		}
		g, ok := e.run.(*guestInstance) // held: nothing closes or replaces it
		if !ok {
			h.release(e)
			return nil, nil, fmt.Errorf("tree %s: not a guest", id)
		}
		return g, func() { h.release(e) }, nil
	}
}
