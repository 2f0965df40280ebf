package guestdb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// DB is storage.DB over the SQL imports. The host owns the connection; the
// guest drives BEGIN … COMMIT. Events appended inside a transaction (seen by
// Hook, core's commit hook) are emitted only once it committed, in commit
// order.
//
// A COMMIT reported failed may still have been durable (a late IOERR: the
// host's storage failed after the commit reached the disk). Core's rerun
// then finds the events stored and writes nothing, so no commit of theirs
// is ever seen to succeed. DB keeps such a transaction's events as
// uncertain and settles them first thing in its next transaction, before
// anything else of this instance can commit: found stored, they are
// emitted then, still in commit order; not found, they are dropped (a rerun
// that stores them emits them after its own commit).
type DB struct {
	sql       SQL
	mu        sync.Mutex // one transaction at a time
	pending   []event.Event
	uncertain []event.Event     // of the last transaction, whose COMMIT was reported failed
	onEmit    func(event.Event) // called after commit, mu held
	names     abi.Names         // column names of results, under mu
}

var _ storage.DB = (*DB)(nil)

// New returns a DB over sql that hands each committed event to onEmit (nil:
// nowhere).
func New(sql SQL, onEmit func(event.Event)) *DB {
	if onEmit == nil {
		onEmit = func(event.Event) {}
	}
	return &DB{sql: sql, onEmit: onEmit}
}

// Tx runs fn in BEGIN … COMMIT and rolls back after any failure, a failed
// COMMIT included: one that failed with BUSY leaves the transaction open.
func (d *DB) Tx(ctx context.Context, fn func(storage.Tx) error) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	d.pending = d.pending[:0]
	if err := status(d.sql.Begin()); err != nil {
		d.rollback()
		return fmt.Errorf("begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			d.rollback()
			d.pending = d.pending[:0]
		}
	}()
	if err := d.settle(); err != nil {
		return err
	}
	if err := fn(tx{d.sql, &d.names}); err != nil {
		return err
	}
	if err := status(d.sql.Commit()); err != nil {
		// The deferred rollback makes the connection usable for a rerun. A
		// commit that failed late was durable all the same: the next
		// transaction finds out.
		d.uncertain, d.pending = d.pending, nil
		return fmt.Errorf("commit: %w", err)
	}
	done = true
	d.emit(d.pending)
	d.pending = nil
	return nil
}

// settle runs at the start of a transaction: the events of a commit
// reported failed are emitted if they are stored. They committed together,
// so the first one tells. Should the read fail, they stay uncertain and the
// transaction fails with the read's error (transient to core, like any
// storage failure).
func (d *DB) settle() error {
	if len(d.uncertain) == 0 {
		return nil
	}
	rows, err := tx{d.sql, &d.names}.Query(`SELECT 1 FROM events WHERE id = ?`, d.uncertain[0].ID)
	if err != nil {
		return fmt.Errorf("look for a commit reported failed: %w", err)
	}
	evs := d.uncertain
	d.uncertain = nil
	if len(rows.Values) > 0 {
		d.emit(evs)
	}
	return nil
}

func (d *DB) emit(evs []event.Event) {
	for _, ev := range evs {
		d.onEmit(ev)
	}
}

// Hook is core's commit hook (core.Config.WithCommitHook): it remembers the
// transaction's events for emit after the commit.
func (d *DB) Hook(_ storage.Tx, ev event.Event) error {
	d.pending = append(d.pending, ev)
	return nil
}

// rollback ends whatever transaction is open; the host's rollback is a
// no-op without one, and a failure leaves nothing to do here.
func (d *DB) rollback() { _ = status(d.sql.Rollback()) }

// ErrTxOpen is SelectOnes's refusal while a transaction of the DB's is open.
var ErrTxOpen = errors.New("a transaction is open")

// SelectOnes runs n statements "SELECT 1" in one transaction through the
// imports, decoding and checking each result as core's queries do, then
// commits: the SQL round trip of revenant_diag_sql. It refuses with
// ErrTxOpen rather than wait for a transaction of the DB's (in the guest,
// waiting would block an export), and emits nothing.
func (d *DB) SelectOnes(n int) error {
	if !d.mu.TryLock() {
		return ErrTxOpen
	}
	defer d.mu.Unlock()
	if err := status(d.sql.Begin()); err != nil {
		d.rollback()
		return fmt.Errorf("begin: %w", err)
	}
	for range n {
		rows, err := tx{d.sql, &d.names}.Query("SELECT 1")
		if err != nil {
			d.rollback()
			return err
		}
		if len(rows.Values) != 1 || len(rows.Values[0]) != 1 || rows.Values[0][0] != int64(1) {
			d.rollback()
			return fmt.Errorf("SELECT 1 answered %v", rows.Values)
		}
	}
	if err := status(d.sql.Commit()); err != nil {
		d.rollback()
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
