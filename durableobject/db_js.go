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
// ctx.storage.sql.exec through the helpers of sql.mjs (one Go→JS call per
// statement); a transaction is ctx.storage.transactionSync around core's
// callback, the only transaction DO SQL allows (it refuses BEGIN and
// SAVEPOINT).
type DB struct {
	sql js.Value // ctx.storage.sql
	// txSync is sql.mjs's helper around ctx.storage.transactionSync (a
	// JS function: Go cannot throw into JS, and a throw is what rolls a
	// transactionSync back). txSync(cb) calls cb inside the transaction;
	// cb returning true asks for a rollback. txSync returns undefined
	// when it committed, the string "rollback" when rolled back as asked,
	// or the error transactionSync threw (never throws itself).
	txSync js.Value
	// sql.mjs's sqlExec, sqlScript and sqlQuery, and sqlQuery.buffer.
	exec, script, query, buffer js.Value
	// answers is sqlQuery's buffer as last fetched; sqlQuery says when it
	// wrote into a new one (call).
	answers js.Value
	// queries holds each statement's text as a JS string, made once: core's
	// statements are constants, and a string passed to JS is copied and
	// given a finalizer on every call. Bounded by maxQueries.
	queries map[string]js.Value

	// mu: one transaction at a time (transactionSync would nest them as
	// savepoints), and no storage call of outside inside one.
	mu sync.Mutex
	// run is the current transaction's body, under mu; callback, made once,
	// is what transactionSync calls: a js.Func per transaction cost a
	// registration, a JS wrapper and a finalizer each time.
	run      func() (rollback bool)
	callback js.Func
}

var (
	_ storage.DB      = (*DB)(nil)
	_ schema.ScriptTx = tx{}
)

// NewDB returns the DB over sql (ctx.storage.sql) with the shim's
// helpers: helpers.txSync and sql.mjs's sqlExec, sqlScript and sqlQuery.
func NewDB(sql, helpers js.Value) *DB {
	d := &DB{sql: sql, txSync: helpers.Get("txSync"),
		exec: helpers.Get("sqlExec"), script: helpers.Get("sqlScript"), query: helpers.Get("sqlQuery"),
		queries: map[string]js.Value{}}
	d.buffer = d.query.Get("buffer")
	// Never released: the DB lives as long as the object's program.
	d.callback = js.FuncOf(func(js.Value, []js.Value) any { return d.run() })
	return d
}

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
	d.run = func() (rollback bool) {
		defer func() {
			if p := recover(); p != nil {
				fnPanic, rollback = p, true
			}
		}()
		fnErr = fn(tx{d})
		return fnErr != nil
	}
	res := d.txSync.Invoke(d.callback)
	d.run = nil
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

// outside makes the storage call f (setAlarm, deleteAlarm, deleteAll)
// once no transaction is open. Go on js/wasm runs every other runnable
// goroutine before it hands a call from JS back (runtime.handleEvent):
// after a transaction's callback has returned and before transactionSync
// commits or rolls back. A storage call made then belongs to that
// transaction on workerd, and its rollback undoes it (a setAlarm undone
// while the Alarm remembers it set: a claim left without its wake-up).
// f must not call Tx.
func (d *DB) outside(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f()
}

// tx is storage.Tx inside one transactionSync callback.
type tx struct{ d *DB }

// Exec runs query and reports the rows it changed, read with SQLite's
// changes() (sqlExec): core relies on the exact count (an INSERT … ON
// CONFLICT DO NOTHING that inserted nothing must read 0).
func (t tx) Exec(query string, args ...any) (n int64, err error) {
	jsArgs, err := t.args(query, args)
	if err != nil {
		return 0, err
	}
	defer recoverSQL(&err)
	return int64(t.d.exec.Invoke(jsArgs...).Float()), nil
}

// ExecScript implements schema.ScriptTx: sql.exec runs every statement
// of a script in one call, so a new tree's migrations cross into JS once
// instead of once per statement.
func (t tx) ExecScript(script string) (err error) {
	defer recoverSQL(&err)
	t.d.script.Invoke(t.d.sql, script)
	return nil
}

// Query runs query and reads every row, handed over by sqlQuery as one
// byte array (decodeRows).
func (t tx) Query(query string, args ...any) (rows *storage.Rows, err error) {
	jsArgs, err := t.args(query, args)
	if err != nil {
		return nil, err
	}
	buf, err := t.call(jsArgs)
	if err != nil {
		return nil, err
	}
	return decodeRows(buf)
}

// call runs sqlQuery and copies its answer into Go.
func (t tx) call(jsArgs []any) (b []byte, err error) {
	defer recoverSQL(&err)
	d := t.d
	n := d.query.Invoke(jsArgs...).Int()
	if n < 0 { // -1-n: the answer is in a new buffer
		n = -1 - n
		d.answers = d.buffer.Invoke(d.sql)
	}
	b = make([]byte, n)
	js.CopyBytesToGo(b, d.answers)
	return b, nil
}

// maxQueries bounds DB.queries (a statement built at run time would add
// one per variant): statements beyond it are passed as Go strings.
const maxQueries = 512

// args is the helpers' arguments: sql, query (as a JS string made once),
// then each argument converted (toJS).
func (t tx) args(query string, args []any) ([]any, error) {
	q, ok := t.d.queries[query]
	if !ok {
		q = js.ValueOf(query)
		if len(t.d.queries) < maxQueries {
			t.d.queries[query] = q
		}
	}
	out := make([]any, 2, len(args)+2)
	out[0], out[1] = t.d.sql, q
	for i, a := range args {
		v, err := toJS(a)
		if err != nil {
			return nil, fmt.Errorf("durableobject: argument %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
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
