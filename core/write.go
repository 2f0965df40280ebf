package core

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
)

// write is one durable operation: a transaction that may append events. Its
// timestamp and the ids it mints are fixed before the first attempt and
// reused in order by any rerun of the same operation, so a retried
// transaction writes identical events.
type write struct {
	inst *Instance
	at   int64
	ids  []string
	// fence, when set, is checked at the start of the transaction.
	fence *fence
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

func (inst *Instance) newWrite() *write {
	return &write{inst: inst, at: inst.host.Clock.Now()}
}

// run executes fn in one transaction, checking the epoch (and the execution
// fence if set) first, and publishes appended events after commit. Writes
// that must land are not cancelled by the caller: the context only carries
// values here.
func (w *write) run(ctx context.Context, fn func(*txw) error) error {
	if w.inst.refusesWrites() {
		return fmt.Errorf("write after the instance stopped: %w", ErrClosed)
	}
	var committed []event.Event
	err := w.inst.host.DB.Tx(context.WithoutCancel(ctx), func(tx storage.Tx) error {
		t := &txw{Tx: tx, w: w}
		if err := w.inst.checkFence(tx, w.fence); err != nil {
			return err
		}
		if err := fn(t); err != nil {
			return err
		}
		committed = t.appended
		return nil
	})
	if err != nil {
		return err
	}
	w.inst.publish(committed)
	return nil
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
	var epoch int64
	var execID string
	var claimed bool
	q := `SELECT (SELECT epoch FROM tree), (SELECT COALESCE(execution_id, '') FROM claims WHERE session_id = ?), EXISTS (SELECT 1 FROM claims WHERE session_id = ?)`
	sid := ""
	if f != nil {
		sid = f.sessionID
	}
	if _, err := storage.QueryRow(tx, q, []any{sid, sid}, &epoch, &execID, &claimed); err != nil {
		return fmt.Errorf("check fence: %w", err)
	}
	if epoch != inst.epoch {
		return fmt.Errorf("instance epoch %d, database epoch %d: %w", inst.epoch, epoch, ErrFenced)
	}
	if f != nil && (!claimed || execID != f.executionID) {
		return fmt.Errorf("execution %s of session %s no longer holds the claim: %w", f.executionID, f.sessionID, ErrFenced)
	}
	return nil
}
