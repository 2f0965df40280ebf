//go:build wasip1

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// db is storage.DB over the SQL imports. The host owns the connection; the
// guest drives BEGIN … COMMIT. Events appended inside a transaction (seen by
// the commit hook) are emitted only once it committed, in commit order.
//
// A COMMIT reported failed may still have been durable (a late IOERR: the
// host's storage failed after the commit reached the disk). Core's rerun
// then finds the events stored and writes nothing, so no commit of theirs
// is ever seen to succeed. The guest keeps such a transaction's events as
// uncertain and settles them first thing in its next transaction, before
// anything else of this instance can commit: found stored, they are
// emitted then, still in commit order; not found, they are dropped (a rerun
// that stores them emits them after its own commit).
type db struct {
	mu        sync.Mutex // one transaction at a time
	pending   []event.Event
	uncertain []event.Event     // of the last transaction, whose COMMIT was reported failed
	onEmit    func(event.Event) // called after commit, mu held
}

var _ storage.DB = (*db)(nil)

func (d *db) Tx(ctx context.Context, fn func(storage.Tx) error) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	d.pending = d.pending[:0]
	if err := sqlResult(hostSQLBegin()); err != nil {
		rollback()
		return fmt.Errorf("begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			rollback()
			d.pending = d.pending[:0]
		}
	}()
	if err := d.settle(); err != nil {
		return err
	}
	if err := fn(tx{}); err != nil {
		return err
	}
	if err := sqlResult(hostSQLCommit()); err != nil {
		// A COMMIT that failed with BUSY leaves the transaction open: the
		// deferred rollback makes the connection usable for a rerun. One
		// that failed late was durable all the same: the next transaction
		// finds out.
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
func (d *db) settle() error {
	if len(d.uncertain) == 0 {
		return nil
	}
	rows, err := tx{}.Query(`SELECT 1 FROM events WHERE id = ?`, d.uncertain[0].ID)
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

func (d *db) emit(evs []event.Event) {
	for _, ev := range evs {
		d.onEmit(ev)
	}
}

// hook is the commit hook: it remembers the transaction's events.
func (d *db) hook(_ storage.Tx, ev event.Event) error {
	d.pending = append(d.pending, ev)
	return nil
}

func rollback() { _ = sqlResult(hostSQLRollback()) }

type tx struct{}

func (tx) Exec(query string, args ...any) (int64, error) {
	b, err := abi.Statement{Query: query, Args: args}.Encode()
	if err != nil {
		return 0, err
	}
	p, n := bytesPtr(b)
	res, err := sqlPayload(hostSQLExec(p, n))
	if err != nil {
		return 0, err
	}
	dec := abi.NewDecoder(res)
	changed := dec.Varint()
	return changed, dec.Finish()
}

func (tx) Query(query string, args ...any) (*storage.Rows, error) {
	b, err := abi.Statement{Query: query, Args: args}.Encode()
	if err != nil {
		return nil, err
	}
	p, n := bytesPtr(b)
	res, err := sqlPayload(hostSQLQuery(p, n))
	if err != nil {
		return nil, err
	}
	rows, err := abi.DecodeRows(res)
	if err != nil {
		return nil, err
	}
	return &storage.Rows{Columns: rows.Columns, Values: rows.Values}, nil
}

func sqlResult(n uint32) error {
	_, err := sqlPayload(n)
	return err
}

// sqlPayload takes an SQL import's result: the OK payload, or the host's
// error as a *storage.Error with its extended code, so core classifies it
// by code.
func sqlPayload(n uint32) ([]byte, error) {
	res := takeResult(n)
	if len(res) == 0 {
		return nil, nil
	}
	switch res[0] {
	case abi.ResultOK:
		return res[1:], nil
	case abi.ResultError:
		se, err := abi.DecodeSQLError(res[1:])
		if err != nil {
			return nil, err
		}
		if se.Code == -1 {
			return nil, fmt.Errorf("%s: %w", se.Message, storage.ErrClosed)
		}
		if se.Code == 0 {
			return nil, errors.New(se.Message)
		}
		return nil, &storage.Error{Code: storage.Code(se.Code), Msg: se.Message}
	}
	return nil, fmt.Errorf("sql result tag %d: %w", res[0], abi.ErrMalformed)
}
