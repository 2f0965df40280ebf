package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
)

// write is one durable operation: a transaction that may append events. Its
// timestamp and the ids it mints are fixed before the first attempt and
// reused in order by any rerun of the same operation, so a retried
// transaction writes identical events.
//
// A write whose transaction fails with a transient storage error (DESIGN
// §8) is rerun whole on the write schedule (retry.Write). A rerun first
// looks for the events its last committing attempt appended: found with the
// same content, that commit was durable although reported failed (a late
// IOERR), and the write is done. A write that appends no event must be
// idempotent, since nothing tells its reruns apart.
type write struct {
	inst *Instance
	at   int64
	ids  []string
	// fence, when set, is checked at the start of the transaction.
	fence *fence
	// locked says the caller holds the claim lock: it is released for the
	// length of each wait, so one session's outage does not stop the
	// others' claims, interrupts and sweeps, and taken again before the
	// next attempt.
	locked bool
	// before, if set, runs before each attempt, outside the transaction (with
	// the claim lock held when locked): what was read before a wait may have
	// changed. An error ends the write with that error.
	before func(attempt int) error
	// pending are the events of the last attempt whose fn returned nil: its
	// commit may have been durable even if it was reported failed.
	pending []event.Event
	// prior, if set, is a write this one replaces after prior exhausted its
	// schedule: if prior's pending events turn out stored, prior committed
	// and this write ends with errPriorStored instead of writing.
	prior *write
}

type fence struct {
	sessionID   string
	executionID string
}

// txw is the writer handed to a write's transaction function.
type txw struct {
	storage.Tx
	w        *write
	nextID   int
	appended []event.Event
}

var (
	// errStored ends a rerun whose previous attempt is found committed.
	errStored = errors.New("write already stored")
	// errPriorStored: the write a settlement replaced had committed after all.
	errPriorStored = errors.New("replaced write already stored")
	// errNothing: a write's before hook found nothing left to do.
	errNothing = errors.New("nothing to write")
)

func (inst *Instance) newWrite() *write {
	return &write{inst: inst, at: inst.host.Clock.Now()}
}

// claimingWrite is a write, under the claim lock the caller holds, that may
// take a claim. It keeps wake rule 1 (DESIGN §4): neither host's wake-up
// (the Durable Object's alarm, the local host's wake index) commits with
// the tree's SQL, so it is armed just before the transaction, under the
// claim lock, and again before every rerun: a wait for storage lets go of
// the claim lock, and a wake may use the wake-up meanwhile.
func (inst *Instance) claimingWrite(ctx context.Context) *write {
	w := inst.newWrite()
	w.locked = true
	w.before = func(int) error {
		if err := inst.host.Wake.Arm(ctx, inst.host.Clock.Now()+inst.cfg.wakeInterval.Milliseconds()); err != nil {
			return fmt.Errorf("arm wake-up: %w", err)
		}
		return nil
	}
	return w
}

// run executes fn in one transaction on the write schedule, checking the
// epoch (and the execution fence if set) first, and publishes appended
// events after commit. Writes that must land are not cancelled by the
// caller: ctx ends a wait between attempts, never a transaction; callers
// that must land pass a context without cancellation, and only the
// instance stopping cuts their waits short.
func (w *write) run(ctx context.Context, fn func(*txw) error) error {
	return w.runOn(ctx, retry.Write(), fn)
}

// runOn is run on another schedule (retry.Settlement for terminals). A
// read-only instance tries once, whatever the schedule: its storage has
// already failed for longer than any of them.
func (w *write) runOn(ctx context.Context, policy retry.Policy, fn func(*txw) error) error {
	inst := w.inst
	if inst.refusesWrites() {
		return fmt.Errorf("write after the instance stopped: %w", ErrClosed)
	}
	if inst.ReadOnly() {
		policy = retry.Policy{Name: policy.Name}
	}
	var committed []event.Event
	loop := retry.Loop{Policy: policy, Clock: inst.host.Clock, Retryable: storage.IsTransient, Stop: inst.stopping, Waiting: w.waiting}
	err := loop.Run(ctx, func(attempt int) error {
		if attempt > 1 && inst.refusesWrites() {
			return fmt.Errorf("write after the instance stopped: %w", ErrClosed)
		}
		if w.before != nil {
			if err := w.before(attempt); err != nil {
				return err
			}
		}
		var err error
		committed, err = w.attempt(ctx, fn)
		return err
	})
	if err == nil || errors.Is(err, errPriorStored) {
		inst.wrote()
		inst.publish(committed)
		return err
	}
	return inst.storageFailure(err)
}

// attempt is one try of the write: take the epoch if this instance booted
// without one, then one transaction.
func (w *write) attempt(ctx context.Context, fn func(*txw) error) ([]event.Event, error) {
	inst := w.inst
	if err := inst.ensureEpoch(ctx); err != nil {
		return nil, err
	}
	var out []event.Event
	err := inst.host.DB.Tx(context.WithoutCancel(ctx), func(tx storage.Tx) error {
		if p := w.prior; p != nil && len(p.pending) > 0 {
			stored, err := storedAlready(tx, p.pending)
			if err != nil {
				return err
			}
			if stored {
				out = p.pending
				return errPriorStored
			}
		}
		if len(w.pending) > 0 {
			stored, err := storedAlready(tx, w.pending)
			if err != nil {
				return err
			}
			if stored {
				out = w.pending
				return errStored
			}
		}
		t := &txw{Tx: tx, w: w}
		if err := inst.checkFence(tx, w.fence); err != nil {
			return err
		}
		// fn runs again: whatever an earlier attempt of it left is not what
		// this one will commit. Should that earlier commit surface later
		// anyway, its event ids make the unique index refuse a duplicate.
		w.pending = nil
		if err := fn(t); err != nil {
			return err
		}
		w.pending = t.appended
		out = t.appended
		return nil
	})
	if errors.Is(err, errStored) {
		inst.log.Info("a write reported failed had committed; not repeating it", "event", out[0].ID)
		return out, nil
	}
	return out, err
}

// storedAlready reports whether the events of an earlier attempt are in
// the log: the first of them, by id, with identical content (they commit
// together). The same id with other content is a collision, not a retry.
func storedAlready(tx storage.Tx, evs []event.Event) (bool, error) {
	ev := evs[0]
	var sessionID, typ, data string
	var at int64
	found, err := storage.QueryRow(tx, `SELECT session_id, type, at, data FROM events WHERE id = ?`, []any{ev.ID}, &sessionID, &typ, &at, &data)
	if err != nil || !found {
		return false, err
	}
	if sessionID != ev.SessionID || typ != string(ev.Type) || at != ev.At || data != string(ev.Data) {
		return false, fmt.Errorf("event id %s is already stored with other content", ev.ID)
	}
	return true, nil
}

// waiting is the retry loop's hook: log, let the observer know, and let go
// of the claim lock for the wait.
func (w *write) waiting(wt retry.Wait) func() {
	inst := w.inst
	level := inst.log.Debug
	if wt.Retry == 1 {
		level = inst.log.Warn // once per write: an outage must not flood the log
	}
	level("storage refused a write; retrying", "schedule", wt.Policy, "retry", wt.Retry, "in", wt.Delay, "err", wt.Err)
	if w.locked {
		inst.claimMu.Unlock()
	}
	if obs := inst.cfg.retryObserver; obs != nil {
		obs(wt)
	}
	if w.locked {
		return inst.claimMu.Lock
	}
	return nil
}

// read runs fn in a transaction for reading, a transient storage failure
// retried on the write schedule (tried once on a read-only instance); fn
// may run more than once, and ctx ending stops the waiting. Unlike a write
// it takes no epoch and does not mark the tree writable again: a read that
// succeeds says nothing of whether storage takes writes.
func (inst *Instance) read(ctx context.Context, fn func(storage.Tx) error) error {
	policy := retry.Write()
	if inst.ReadOnly() {
		policy = retry.Policy{Name: policy.Name}
	}
	loop := retry.Loop{Policy: policy, Clock: inst.host.Clock, Retryable: storage.IsTransient, Stop: inst.stopping,
		Waiting: (&write{inst: inst}).waiting}
	return inst.storageFailure(loop.Run(ctx, func(int) error { return inst.host.DB.Tx(context.WithoutCancel(ctx), fn) }))
}

// storageFailure turns the retry loop's giving up into core's errors:
// ErrStorageUnavailable when the schedule was spent, ErrReadOnly when a
// read-only instance's one try failed, ErrClosed when the instance stopped
// during a wait. Other errors pass unchanged.
func (inst *Instance) storageFailure(err error) error {
	var re *retry.Error
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case errors.Is(re.Cause, retry.ErrExhausted) && inst.ReadOnly():
		return fmt.Errorf("%w: %w", ErrReadOnly, re.Err)
	case errors.Is(re.Cause, retry.ErrExhausted):
		return fmt.Errorf("%w: %w", ErrStorageUnavailable, err)
	case errors.Is(re.Cause, retry.ErrStopped):
		return fmt.Errorf("stopped waiting for storage: %w", errors.Join(ErrClosed, re.Err))
	}
	return err
}

// isStorageFailure reports whether err means storage would not take the
// write (its schedule was spent, or the tree is read-only), as opposed to a
// fence, a stop or a bug.
func isStorageFailure(err error) bool {
	return errors.Is(err, ErrStorageUnavailable) || errors.Is(err, ErrReadOnly)
}

// id returns the write's next id, minting it on first use only.
func (t *txw) id() string {
	if t.nextID == len(t.w.ids) {
		t.w.ids = append(t.w.ids, t.w.inst.host.IDs.NewID())
	}
	id := t.w.ids[t.nextID]
	t.nextID++
	return id
}

// now is the write's fixed timestamp.
func (t *txw) now() int64 { return t.w.at }

// append stores one event at the session's next seq, runs the projectors and
// commit hooks, and remembers it for publication after commit.
func (t *txw) append(sessionID string, typ event.Type, payload any) (event.Event, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return event.Event{}, fmt.Errorf("append %s: encode: %w", typ, err)
	}
	ev := event.Event{ID: t.id(), SessionID: sessionID, Type: typ, At: t.now(), Data: data}
	var last int64
	if _, err := storage.QueryRow(t, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?`, []any{sessionID}, &last); err != nil {
		return ev, fmt.Errorf("append %s: read seq: %w", typ, err)
	}
	ev.Seq = last + 1
	if _, err := t.Exec(`INSERT INTO events (session_id, seq, id, type, at, data, gseq) VALUES (?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(gseq), 0) + 1 FROM events))`,
		ev.SessionID, ev.Seq, ev.ID, string(ev.Type), ev.At, string(ev.Data)); err != nil {
		return ev, fmt.Errorf("append %s: %w", typ, err)
	}
	if err := project(t.Tx, ev); err != nil {
		return ev, err
	}
	for _, h := range t.w.inst.cfg.commitHooks {
		if err := h(t.Tx, ev); err != nil {
			return ev, fmt.Errorf("append %s: commit hook: %w", typ, err)
		}
	}
	t.appended = append(t.appended, ev)
	return ev, nil
}

func (inst *Instance) checkFence(tx storage.Tx, f *fence) error {
	sid := ""
	if f != nil {
		sid = f.sessionID
	}
	epoch, execID, claimed, err := claimTable{tx}.fence(sid)
	if err != nil {
		return fmt.Errorf("check fence: %w", err)
	}
	if mine := inst.epoch.Load(); epoch != mine {
		return fmt.Errorf("instance epoch %d, database epoch %d: %w", mine, epoch, ErrFenced)
	}
	if f != nil && (!claimed || execID != f.executionID) {
		return fmt.Errorf("execution %s of session %s no longer holds the claim: %w", f.executionID, f.sessionID, ErrFenced)
	}
	return nil
}
