//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall/js"

	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/core/storage"
)

// DB is storage.DB on a Durable Object's SQLite storage. Statements run on
// ctx.storage.sql.exec; a transaction is ctx.storage.transactionSync
// around core's callback, the only transaction DO SQL allows (it refuses
// BEGIN and SAVEPOINT).
type DB struct {
	sql js.Value // ctx.storage.sql
	// txSync is the shim's helper around ctx.storage.transactionSync (a
	// JS function: Go cannot throw into JS, and a throw is what rolls a
	// transactionSync back). txSync(cb) calls cb inside the transaction;
	// cb returning true asks for a rollback. txSync returns undefined
	// when it committed, the string "rollback" when rolled back as asked,
	// or the error transactionSync threw (never throws itself).
	txSync js.Value

	mu sync.Mutex // one transaction at a time: transactionSync would nest them as savepoints
}

var (
	_ storage.DB      = (*DB)(nil)
	_ schema.ScriptTx = tx{}
)

// NewDB returns the DB over sql (ctx.storage.sql) with the shim's txSync.
func NewDB(sql, txSync js.Value) *DB { return &DB{sql: sql, txSync: txSync} }

// rolledBack is txSync's answer when the callback asked for a rollback.
const rolledBack = "rollback"

// Tx implements storage.DB. fn runs synchronously inside transactionSync;
// its error (or panic) rolls back and is returned (re-panicked) unchanged.
func (d *DB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	var fnErr error
	var fnPanic any
	cb := js.FuncOf(func(js.Value, []js.Value) (rollback any) {
		defer func() {
			if p := recover(); p != nil {
				fnPanic, rollback = p, true
			}
		}()
		fnErr = fn(tx{sql: d.sql})
		return fnErr != nil
	})
	defer cb.Release()
	res := d.txSync.Invoke(cb)
	switch {
	case fnPanic != nil:
		panic(fnPanic) // rolled back; the entry point's recover answers it
	case fnErr != nil:
		return fnErr
	case res.Type() == js.TypeUndefined:
		return nil
	case res.Type() == js.TypeString && res.String() == rolledBack:
		return errors.New("durableobject: transaction rolled back without an error")
	default:
		return fmt.Errorf("durableobject: commit: %w", sqlError(res))
	}
}

// tx is storage.Tx inside one transactionSync callback.
type tx struct{ sql js.Value }

// Exec runs query and reports the rows it changed, read with SQLite's
// changes(): the cursor's rowsWritten also counts index rows, and core
// relies on the exact count (an INSERT … ON CONFLICT DO NOTHING that
// inserted nothing must read 0).
func (t tx) Exec(query string, args ...any) (int64, error) {
	c, err := t.run(query, args)
	if err != nil {
		return 0, err
	}
	if err := drain(c); err != nil {
		return 0, err
	}
	c, err = t.run("SELECT changes()", nil)
	if err != nil {
		return 0, err
	}
	rows, err := readRaw(c)
	if err != nil {
		return 0, err
	}
	return int64(rows.Index(0).Index(0).Float()), nil
}

// ExecScript implements schema.ScriptTx: sql.exec runs every statement
// of a script in one call, so a new tree's migrations cross into JS once
// instead of twice per statement.
func (t tx) ExecScript(script string) error {
	c, err := t.run(script, nil)
	if err != nil {
		return err
	}
	return drain(c)
}

// Query runs query and reads every row.
func (t tx) Query(query string, args ...any) (*storage.Rows, error) {
	c, err := t.run(query, args)
	if err != nil {
		return nil, err
	}
	names := c.Get("columnNames")
	raw, err := readRaw(c)
	if err != nil {
		return nil, err
	}
	rows := &storage.Rows{Columns: make([]string, names.Length()), Values: make([][]any, raw.Length())}
	for i := range rows.Columns {
		rows.Columns[i] = names.Index(i).String()
	}
	for i := range rows.Values {
		jr := raw.Index(i)
		row := make([]any, jr.Length())
		for j := range row {
			v, err := fromJS(jr.Index(j))
			if err != nil {
				return nil, fmt.Errorf("durableobject: read column %s: %w", rows.Columns[j], err)
			}
			row[j] = v
		}
		rows.Values[i] = row
	}
	return rows, nil
}

// readRaw reads every row of a cursor as arrays of values (raw() keeps
// duplicate column names apart, where toArray's objects would merge them).
func readRaw(c js.Value) (rows js.Value, err error) {
	defer recoverSQL(&err)
	return c.Call("raw").Call("toArray"), nil
}

// drain steps a statement's cursor to its end, so a statement runs fully
// whether or not the platform steps it before the first read.
func drain(c js.Value) (err error) {
	defer recoverSQL(&err)
	c.Call("toArray")
	return nil
}

// recoverSQL turns a JS exception thrown by DO SQL, a Go panic of a
// js.Error, into the SQL error it reports; any other panic goes on.
func recoverSQL(err *error) {
	if p := recover(); p != nil {
		je, ok := p.(js.Error)
		if !ok {
			panic(p)
		}
		*err = sqlError(je.Value)
	}
}

// run calls sql.exec and consumes nothing yet; a JS exception (the only
// way DO SQL reports a failure) is recovered into an *storage.Error.
func (t tx) run(query string, args []any) (cursor js.Value, err error) {
	jsArgs := make([]any, 1, len(args)+1)
	jsArgs[0] = query
	for i, a := range args {
		v, err := toJS(a)
		if err != nil {
			return js.Value{}, fmt.Errorf("durableobject: argument %d: %w", i+1, err)
		}
		jsArgs = append(jsArgs, v)
	}
	defer recoverSQL(&err)
	return t.sql.Call("exec", jsArgs...), nil
}

// sqlError maps a JS error (DO SQL reports failures as text only) to a
// *storage.Error with the SQLite code named in its text. Text that names
// no code stays a plain error: core never classifies by message.
func sqlError(v js.Value) error {
	msg := jsText(v)
	code, ok := storage.CodeFromText(msg)
	if !ok {
		return fmt.Errorf("durableobject: sql: %s", msg)
	}
	return &storage.Error{Code: code, Msg: msg}
}

// jsText is the message of a thrown JS value.
func jsText(v js.Value) string {
	if v.Type() == js.TypeObject {
		if m := v.Get("message"); m.Type() == js.TypeString {
			return m.String()
		}
	}
	return js.Global().Get("String").Invoke(v).String()
}
