//go:build js && wasm

package durableobject

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"syscall/js"
	"testing"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run under Node (GOOS=js GOARCH=wasm go test with
// go_js_wasm_exec on PATH) against a JS stand-in for ctx.storage.sql that
// answers scripted results: they check the bridge's conversions and error
// mapping, not SQLite (the workerd e2e does that).

// jsFunc compiles a JS function for a stand-in (Node allows new Function;
// workerd would not, which is why sql.mjs, not Go, defines txSync).
func jsFunc(params []string, body string) js.Value {
	args := make([]any, 0, len(params)+1)
	for _, p := range params {
		args = append(args, p)
	}
	return js.Global().Get("Function").New(append(args, body)...)
}

// fakeSQL answers exec(query) from script[query]: an array of rows, or a
// string to throw as an Error. "SELECT changes()" answers 1. A cursor's
// rowsWritten is script["written " + query] (undefined when not given).
func fakeSQL(t *testing.T, script string) js.Value {
	t.Helper()
	return jsFunc([]string{"script"}, `
		const log = [];
		return { log, exec(q, ...args) {
			log.push([q, ...args]);
			const a = q === "SELECT changes()" ? [[1]] : script[q];
			if (typeof a === "string") throw new Error(a);
			const rows = a || [];
			return { columnNames: rows.length ? rows[0].map((_, i) => "c" + i) : [], rowsWritten: script["written " + q],
				raw() { return { toArray() { return rows; }, [Symbol.iterator]() { return rows[Symbol.iterator](); } }; }, toArray() { return rows; } };
		} };`).Invoke(js.Global().Get("JSON").Call("parse", script))
}

// storageStandIn is a stand-in for ctx.storage whose transactionSync runs
// the callback and records whether it committed or rolled back (the
// callback threw).
var storageStandIn = jsFunc([]string{"state"}, `
	return { transactionSync(fn) {
		try { fn(); } catch (e) { state.rolledBack++; throw e; }
		state.committed++;
	} };`)

// helpers is the shim's bridge for NewDB: sql.mjs's txSync over storage
// (as the shim binds it to ctx.storage) and its SQL helpers, the file
// itself evaluated here (its exports made a returned object).
func helpers(t *testing.T, storage js.Value) js.Value {
	t.Helper()
	src, err := os.ReadFile("sql.mjs")
	require.NoError(t, err)
	body := strings.ReplaceAll(string(src), "export function", "function") +
		"\nreturn { txSync: (cb) => txSync(storage, cb), sqlExec, sqlScript, sqlQuery };"
	return jsFunc([]string{"storage"}, body).Invoke(storage)
}

func newTestDB(t *testing.T, script string) (*DB, js.Value, js.Value) {
	state := js.Global().Get("JSON").Call("parse", `{"committed":0,"rolledBack":0}`)
	sql := fakeSQL(t, script)
	return NewDB(sql, helpers(t, storageStandIn.Invoke(state))), sql, state
}

func TestQueryMapsJSValuesToCoreTypes(t *testing.T) {
	db, _, _ := newTestDB(t, `{"q": [[1, 1.5, "s", null, 9007199254740991, 1e300]]}`)
	var rows *storage.Rows
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		var err error
		rows, err = tx.Query("q")
		return err
	}))
	require.Equal(t, 1, rows.Len())
	assert.Equal(t, []any{int64(1), 1.5, "s", nil, int64(1<<53 - 1), 1e300}, rows.Values[0])
}

func TestBlobsRoundTripAsArrayBuffers(t *testing.T) {
	db, sql, _ := newTestDB(t, `{}`)
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		_, err := tx.Exec("INSERT", []byte{0, 1, 255}, int64(42), "x", nil)
		return err
	}))
	call := sql.Get("log").Index(0)
	buf := call.Index(1)
	require.True(t, buf.InstanceOf(js.Global().Get("ArrayBuffer")), "a []byte goes to SQL as an ArrayBuffer")
	v := make([]byte, 3)
	require.Equal(t, 3, js.CopyBytesToGo(v, jsUint8Array.New(buf)))
	assert.Equal(t, []byte{0, 1, 255}, v)
	assert.Equal(t, 42, call.Index(2).Int())
	assert.True(t, call.Index(4).IsNull())
}

// A statement whose cursor wrote no row changed none: Exec answers 0
// without asking changes(), whose count may be an earlier statement's. One
// that wrote rows answers changes(), not rowsWritten (which counts index
// rows too).
func TestExecCountsFromChangesUnlessNothingWasWritten(t *testing.T) {
	db, sql, _ := newTestDB(t, `{"written NOOP": 0, "written INS": 3}`)
	var noop, ins int64
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		var err error
		if noop, err = tx.Exec("NOOP"); err != nil {
			return err
		}
		ins, err = tx.Exec("INS")
		return err
	}))
	assert.Zero(t, noop)
	assert.Equal(t, int64(1), ins, "changes(), not the 3 rows written")
	var queries []string
	log := sql.Get("log")
	for i := range log.Length() {
		queries = append(queries, log.Index(i).Index(0).String())
	}
	assert.Equal(t, []string{"NOOP", "INS", "SELECT changes()"}, queries)
}

func TestIntegersBeyondJSPrecisionAreRefused(t *testing.T) {
	db, _, _ := newTestDB(t, `{}`)
	for _, n := range []int64{1<<53 + 1, -(1<<53 + 1), math.MaxInt64} {
		err := db.Tx(context.Background(), func(tx storage.Tx) error {
			_, err := tx.Exec("INSERT", n)
			return err
		})
		require.Error(t, err, "%d would be rounded", n)
	}
}

// Core bounds open ranges with 1<<62 (a snapshot without "before"): exact
// as a float64, so it must pass.
func TestExactLargeIntegersPass(t *testing.T) {
	db, sql, _ := newTestDB(t, `{}`)
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		_, err := tx.Query("SELECT", int64(1)<<62, int64(1)<<53)
		return err
	}))
	call := sql.Get("log").Index(0)
	assert.Equal(t, float64(1<<62), call.Index(1).Float())
	assert.Equal(t, float64(1<<53), call.Index(2).Float())
}

func TestSQLErrorTextMapsToCode(t *testing.T) {
	db, _, state := newTestDB(t, `{"full": "Error: database or disk is full: SQLITE_FULL", "syntax": "near \"x\": syntax error"}`)
	var fullErr, syntaxErr error
	err := db.Tx(context.Background(), func(tx storage.Tx) error {
		_, fullErr = tx.Exec("full")
		_, syntaxErr = tx.Query("syntax")
		return fullErr
	})
	assert.ErrorIs(t, fullErr, storage.CodeFull)
	assert.Same(t, fullErr, err, "fn's error comes back unchanged")
	assert.Equal(t, storage.Code(0), storage.CodeOf(syntaxErr), "text naming no code is not classified")
	assert.Equal(t, 1, state.Get("rolledBack").Int())
	assert.Equal(t, 0, state.Get("committed").Int())
}

func TestCommitFailureIsMapped(t *testing.T) {
	// The callback ran and asked for no rollback; the commit itself
	// failed (transactionSync threw after it).
	failing := jsFunc(nil, `return { transactionSync(fn) { fn(); throw new Error("SQLITE_BUSY: database is locked"); } };`).Invoke()
	db := NewDB(fakeSQL(t, `{}`), helpers(t, failing))
	ran := false
	err := db.Tx(context.Background(), func(tx storage.Tx) error {
		ran = true
		_, err := tx.Exec("INSERT")
		return err
	})
	require.True(t, ran)
	assert.ErrorIs(t, err, storage.CodeBusy, "a failed commit is the transaction's error, never a success")
}

func TestPanicInTxRollsBackAndRepanics(t *testing.T) {
	db, _, state := newTestDB(t, `{}`)
	boom := errors.New("boom")
	assert.PanicsWithValue(t, boom, func() {
		_ = db.Tx(context.Background(), func(storage.Tx) error { panic(boom) })
	})
	assert.Equal(t, 1, state.Get("rolledBack").Int(), "the callback asked for a rollback")
}

// Every kind of value DO SQL returns crosses sqlQuery's byte array intact,
// with duplicate column names kept apart.
func TestQueryCarriesEveryValueKind(t *testing.T) {
	sql := jsFunc(nil, `return { exec() { const rows = [[new Uint8Array([1, 2, 255]).buffer, true, "é✓ x", -0.5, 2 ** 53, null, ""]];
		return { columnNames: ["a", "a", "c", "d", "e", "f", "g"], raw() { return rows[Symbol.iterator](); } }; } };`).Invoke()
	state := js.Global().Get("JSON").Call("parse", `{"committed":0,"rolledBack":0}`)
	db := NewDB(sql, helpers(t, storageStandIn.Invoke(state)))
	var rows *storage.Rows
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		var err error
		rows, err = tx.Query("q")
		return err
	}))
	assert.Equal(t, []string{"a", "a", "c", "d", "e", "f", "g"}, rows.Columns)
	assert.Equal(t, [][]any{{[]byte{1, 2, 255}, int64(1), "é✓ x", -0.5, float64(1 << 53), nil, ""}}, rows.Values)
}

// A truncated or corrupt answer is an error, never a panic or a short row.
func TestDecodeRowsRefusesBadInput(t *testing.T) {
	good := []byte{1, 0, 0, 0, 1, 0, 0, 0, 'a', 1, 0, 0, 0, 2, 2, 0, 0, 0, 'h', 'i'}
	rows, err := decodeRows(good)
	require.NoError(t, err)
	assert.Equal(t, [][]any{{"hi"}}, rows.Values)
	for n := range len(good) {
		_, err := decodeRows(good[:n])
		assert.Error(t, err, "cut at %d", n)
	}
	bad := append([]byte{}, good...)
	bad[13] = 9
	_, err = decodeRows(bad)
	assert.ErrorContains(t, err, "value tag 9")

	// A row count past what the bytes could hold is refused before the
	// rows are allocated: 2^31-1 rows would ask for gigabytes.
	huge := append([]byte{}, good...)
	copy(huge[9:13], []byte{0xff, 0xff, 0xff, 0x7f})
	_, err = decodeRows(huge)
	assert.ErrorIs(t, err, errShortRows)

	// A byte past the last row: the answer's length was misread.
	_, err = decodeRows(append(append([]byte{}, good...), 0))
	assert.ErrorContains(t, err, "past its last row")
}

// A transaction asked for with a context already done runs nothing and
// says why, as core/storage's contract has it: no statement reaches SQL.
func TestTxWithADoneContextRunsNothing(t *testing.T) {
	db, sql, state := newTestDB(t, `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err := db.Tx(ctx, func(tx storage.Tx) error {
		ran = true
		_, err := tx.Exec("INSERT")
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ran)
	assert.Zero(t, sql.Get("log").Length())
	assert.Zero(t, state.Get("committed").Int())
}

// Booleans go to SQL as 1 and 0 (SQLite has no boolean), and every Go
// integer type core uses as its exact JS number.
func TestArgumentsOfEveryScalarType(t *testing.T) {
	db, sql, _ := newTestDB(t, `{}`)
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		_, err := tx.Exec("INSERT", true, false, int32(-7), 12, 2.5)
		return err
	}))
	call := sql.Get("log").Index(0)
	for i, want := range []float64{1, 0, -7, 12, 2.5} {
		assert.Equal(t, want, call.Index(i+1).Float(), "argument %d", i+1)
	}
	_, err := toJS(struct{}{})
	assert.ErrorContains(t, err, "unsupported SQL argument")
}

// sqlQuery reuses one buffer per database and replaces it only to grow:
// a longer answer after a short one, a short one after it, an answer that
// grew the buffer while shorter than the old one, and another database of
// the same module (the objects of one isolate share sql.mjs) growing its
// own buffer in between all read back their own rows.
func TestQueryAnswersSurviveBufferGrowthAndOtherDatabases(t *testing.T) {
	long := strings.Repeat("x", 5000)
	script := `{"short": [["a", 1]], "medium": [["` + strings.Repeat("m", 90) + `"]], "long": [["` + long + `", 2], ["` + long + `", 3]]}`
	h := helpers(t, storageStandIn.Invoke(js.Global().Get("JSON").Call("parse", `{"committed":0,"rolledBack":0}`)))
	one, other := NewDB(fakeSQL(t, script), h), NewDB(fakeSQL(t, script), h)
	query := func(db *DB, q string) [][]any {
		var rows *storage.Rows
		require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
			var err error
			rows, err = tx.Query(q)
			return err
		}))
		return rows.Values
	}
	short, longRows := [][]any{{"a", int64(1)}}, [][]any{{long, int64(2)}, {long, int64(3)}}
	assert.Equal(t, short, query(one, "short"))
	// Room for a string's longest UTF-8 (3 bytes a unit) grows the first
	// buffer (256 bytes) although the answer is shorter than it.
	assert.Equal(t, [][]any{{strings.Repeat("m", 90)}}, query(one, "medium"), "a new buffer for a short answer")
	assert.Equal(t, short, query(one, "short"))
	assert.Equal(t, short, query(other, "short"))
	assert.Equal(t, longRows, query(other, "long"), "grows the other database's buffer")
	assert.Equal(t, short, query(one, "short"), "one's buffer is its own")
	assert.Equal(t, longRows, query(one, "long"))
	assert.Equal(t, short, query(one, "short"))
	assert.Equal(t, longRows, query(one, "long"), "the grown buffer is reused")
}

// queryStandIn answers every query with rows (a JS expression), one column
// per value, through a fresh DB: sqlQuery's buffer is new (256 bytes).
func queryStandIn(t *testing.T, rows string) [][]any {
	t.Helper()
	sql := jsFunc(nil, `return { exec() { const rows = `+rows+`;
		return { columnNames: rows[0].map((_, i) => "c" + i), raw() { return rows[Symbol.iterator](); } }; } };`).Invoke()
	state := js.Global().Get("JSON").Call("parse", `{"committed":0,"rolledBack":0}`)
	db := NewDB(sql, helpers(t, storageStandIn.Invoke(state)))
	var got *storage.Rows
	require.NoError(t, db.Tx(context.Background(), func(tx storage.Tx) error {
		var err error
		got, err = tx.Query("q")
		return err
	}))
	return got.Values
}

// Text whose UTF-8 is longer than its UTF-16 (2, 3 and 4 bytes a
// character) and longer than the room a new buffer has left reads back
// whole: the buffer grows for the text's UTF-8, not its length in units.
func TestQueryCarriesLongNonASCIIText(t *testing.T) {
	for _, ch := range []string{"é", "✓", "😀"} {
		text := strings.Repeat(ch, 200)
		assert.Equal(t, [][]any{{text, int64(7)}}, queryStandIn(t, `[["`+text+`", 7]]`), "%q × 200", ch)
	}
}

// A blob DO SQL hands back as a view into a larger buffer (a typed array
// or DataView with an offset) crosses as the view's bytes only.
func TestQueryBlobViewsCarryOnlyTheirBytes(t *testing.T) {
	got := queryStandIn(t, `(() => { const b = new Uint8Array([9, 9, 1, 2, 255, 9]).buffer;
		return [[new Uint8Array(b, 2, 3), new DataView(b, 1, 2)]]; })()`)
	assert.Equal(t, [][]any{{[]byte{1, 2, 255}, []byte{9, 1}}}, got)
}
