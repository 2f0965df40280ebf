package storage_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
)

// row returns a one-row result positioned on that row.
func row(values ...any) *storage.Rows {
	cols := make([]string, len(values))
	for i := range cols {
		cols[i] = fmt.Sprintf("c%d", i)
	}
	r := &storage.Rows{Columns: cols, Values: [][]any{values}}
	if !r.Next() {
		panic("one-row result has no row")
	}
	return r
}

func TestScanConversions(t *testing.T) {
	t.Run("string", func(t *testing.T) {
		var a, b, c string
		require.NoError(t, row("text", []byte("blob"), nil).Scan(&a, &b, &c))
		assert.Equal(t, "text", a)
		assert.Equal(t, "blob", b)
		assert.Equal(t, "", c, "NULL scans as the zero value")
	})
	t.Run("bytes", func(t *testing.T) {
		src := []byte("blob")
		b := []byte("old")
		s := []byte("old")
		n := []byte("old")
		require.NoError(t, row(src, "text", nil).Scan(&b, &s, &n))
		assert.Equal(t, []byte("blob"), b)
		assert.Equal(t, []byte("text"), s)
		assert.Nil(t, n, "NULL scans as a nil slice")
		src[0] = 'X'
		assert.Equal(t, []byte("blob"), b, "the scanned slice is a copy")
	})
	t.Run("integers", func(t *testing.T) {
		var i64, fromFloat, null int64 = 0, 0, 7
		var i int
		require.NoError(t, row(int64(1)<<53+1, 3.9, nil, int64(-2)).Scan(&i64, &fromFloat, &null, &i))
		assert.Equal(t, int64(1)<<53+1, i64, "int64 keeps every bit")
		assert.Equal(t, int64(3), fromFloat, "a REAL truncates")
		assert.Zero(t, null, "NULL scans as zero")
		assert.Equal(t, -2, i)
	})
	t.Run("bool", func(t *testing.T) {
		var yes, no, null, two bool = false, true, true, false
		require.NoError(t, row(int64(1), int64(0), nil, int64(2)).Scan(&yes, &no, &null, &two))
		assert.True(t, yes)
		assert.False(t, no)
		assert.False(t, null)
		assert.True(t, two, "any non-zero integer is true, as in SQL (a count scanned into a bool)")
	})
	t.Run("any", func(t *testing.T) {
		var a, b any = "old", "old"
		require.NoError(t, row(2.5, nil).Scan(&a, &b))
		assert.Equal(t, 2.5, a)
		assert.Nil(t, b)
	})
	t.Run("NullString", func(t *testing.T) {
		v := sql.NullString{String: "stale", Valid: true}
		require.NoError(t, row(nil).Scan(&v))
		assert.Equal(t, sql.NullString{}, v, "NULL resets a previously valid value")
		require.NoError(t, row("x").Scan(&v))
		assert.Equal(t, sql.NullString{String: "x", Valid: true}, v)
		require.NoError(t, row([]byte("y")).Scan(&v))
		assert.Equal(t, sql.NullString{String: "y", Valid: true}, v)
	})
	t.Run("NullInt64", func(t *testing.T) {
		v := sql.NullInt64{Int64: 9, Valid: true}
		require.NoError(t, row(nil).Scan(&v))
		assert.Equal(t, sql.NullInt64{}, v)
		require.NoError(t, row(int64(42)).Scan(&v))
		assert.Equal(t, sql.NullInt64{Int64: 42, Valid: true}, v)
	})
}

func TestScanErrors(t *testing.T) {
	var s string
	var n int64
	var ns sql.NullInt64
	var f float64
	var b []byte
	for name, tc := range map[string]struct {
		rows *storage.Rows
		dest []any
	}{
		"text into int64":       {row("12"), []any{&n}},
		"blob into int64":       {row([]byte{1}), []any{&n}},
		"int into string":       {row(int64(1)), []any{&s}},
		"float into []byte":     {row(1.5), []any{&b}},
		"text into NullInt64":   {row("x"), []any{&ns}},
		"unsupported *float64":  {row(1.5), []any{&f}},
		"non-pointer dest":      {row("x"), []any{s}},
		"too few destinations":  {row("a", "b"), []any{&s}},
		"too many destinations": {row("a"), []any{&s, &n}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, tc.rows.Scan(tc.dest...))
		})
	}

	t.Run("before Next", func(t *testing.T) {
		r := &storage.Rows{Columns: []string{"a"}, Values: [][]any{{"x"}}}
		assert.Error(t, r.Scan(&s))
	})
	t.Run("past the end", func(t *testing.T) {
		r := &storage.Rows{Columns: []string{"a"}, Values: [][]any{{"x"}}}
		require.True(t, r.Next())
		require.False(t, r.Next())
		assert.Error(t, r.Scan(&s))
	})
}

func TestRowsIteration(t *testing.T) {
	var nilRows *storage.Rows
	assert.False(t, nilRows.Next())
	assert.Zero(t, nilRows.Len())

	r := &storage.Rows{Columns: []string{"n"}, Values: [][]any{{int64(1)}, {int64(2)}, {int64(3)}}}
	assert.Equal(t, 3, r.Len())
	var got []int64
	for r.Next() {
		var n int64
		require.NoError(t, r.Scan(&n))
		got = append(got, n)
	}
	assert.Equal(t, []int64{1, 2, 3}, got)
}

// fakeTx answers every Query with fixed rows (or an error).
type fakeTx struct {
	rows *storage.Rows
	err  error
}

func (f fakeTx) Exec(string, ...any) (int64, error) { return 0, errors.New("not used") }
func (f fakeTx) Query(string, ...any) (*storage.Rows, error) {
	return f.rows, f.err
}

func TestQueryRow(t *testing.T) {
	t.Run("found", func(t *testing.T) {
		tx := fakeTx{rows: &storage.Rows{Columns: []string{"a", "b"}, Values: [][]any{{"x", int64(1)}, {"y", int64(2)}}}}
		var s string
		var n int
		found, err := storage.QueryRow(tx, "q", nil, &s, &n)
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, "x", s, "the first row")
		assert.Equal(t, 1, n)
	})
	t.Run("no row leaves dest alone", func(t *testing.T) {
		s := "untouched"
		found, err := storage.QueryRow(fakeTx{rows: &storage.Rows{Columns: []string{"a"}}}, "q", nil, &s)
		require.NoError(t, err)
		assert.False(t, found)
		assert.Equal(t, "untouched", s)
	})
	t.Run("query error", func(t *testing.T) {
		boom := &storage.Error{Code: storage.CodeIOErr}
		found, err := storage.QueryRow(fakeTx{err: boom}, "q", nil)
		assert.False(t, found)
		assert.ErrorIs(t, err, boom)
	})
	t.Run("scan error", func(t *testing.T) {
		var n int64
		found, err := storage.QueryRow(fakeTx{rows: &storage.Rows{Columns: []string{"a"}, Values: [][]any{{"text"}}}}, "q", nil, &n)
		assert.True(t, found)
		assert.Error(t, err)
	})
}

// Extended codes used below (https://sqlite.org/rescode.html).
const (
	ioerrRead       = storage.CodeIOErr | 1<<8      // SQLITE_IOERR_READ
	ioerrShortRead  = storage.CodeIOErr | 2<<8      // SQLITE_IOERR_SHORT_READ
	ioerrWrite      = storage.CodeIOErr | 3<<8      // SQLITE_IOERR_WRITE
	ioerrFsync      = storage.CodeIOErr | 4<<8      // SQLITE_IOERR_FSYNC
	busySnapshot    = storage.CodeBusy | 2<<8       // SQLITE_BUSY_SNAPSHOT
	lockedShared    = storage.CodeLocked | 1<<8     // SQLITE_LOCKED_SHAREDCACHE
	constraintUniq  = storage.CodeConstraint | 8<<8 // SQLITE_CONSTRAINT_UNIQUE
	constraintCheck = storage.CodeConstraint | 1<<8 // SQLITE_CONSTRAINT_CHECK
)

func TestErrorIsByCode(t *testing.T) {
	host := errors.New("driver detail")
	err := error(&storage.Error{Code: ioerrWrite, Msg: "disk I/O error", Err: host})
	wrapped := fmt.Errorf("append event: %w", err)

	for _, e := range []error{err, wrapped} {
		assert.ErrorIs(t, e, storage.CodeIOErr, "primary code matches an extended one")
		assert.ErrorIs(t, e, ioerrWrite, "the exact extended code matches")
		assert.NotErrorIs(t, e, ioerrFsync, "another extended code of the same primary does not")
		assert.NotErrorIs(t, e, storage.CodeBusy)
		assert.ErrorIs(t, e, host, "the host's error is reachable")
		assert.Equal(t, ioerrWrite, storage.CodeOf(e))
	}
	assert.Equal(t, storage.CodeIOErr, ioerrWrite.Primary())
	assert.Equal(t, storage.CodeBusy, storage.CodeBusy.Primary())

	plain := &storage.Error{Code: storage.CodeBusy}
	assert.ErrorIs(t, plain, storage.CodeBusy)
	assert.NotErrorIs(t, plain, busySnapshot, "a primary code does not match an extended target")

	assert.Zero(t, storage.CodeOf(errors.New("not storage")))
	assert.Zero(t, storage.CodeOf(nil))
	assert.Contains(t, err.Error(), "disk I/O error")
	assert.Contains(t, plain.Error(), "5")
}

func TestIsTransient(t *testing.T) {
	e := func(c storage.Code) error { return &storage.Error{Code: c} }
	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"nil", nil, false},
		{"FULL", e(storage.CodeFull), true},
		{"BUSY nested in %w", fmt.Errorf("commit: %w", fmt.Errorf("tx: %w", e(storage.CodeBusy))), true},
		{"BUSY_SNAPSHOT", e(busySnapshot), true},
		{"LOCKED", e(storage.CodeLocked), true},
		{"LOCKED_SHAREDCACHE", e(lockedShared), true},
		{"IOERR", e(storage.CodeIOErr), true},
		{"IOERR_READ", e(ioerrRead), true},
		{"IOERR_SHORT_READ", e(ioerrShortRead), true},
		{"IOERR_WRITE", e(ioerrWrite), true},
		{"IOERR_FSYNC wrapped", fmt.Errorf("commit: %w", e(ioerrFsync)), true},
		{"CONSTRAINT", e(storage.CodeConstraint), false},
		{"CONSTRAINT_UNIQUE", e(constraintUniq), false},
		{"CONSTRAINT_CHECK", e(constraintCheck), false},
		{"CORRUPT", e(storage.CodeCorrupt), false},
		{"READONLY", e(storage.CodeReadOnly), false},
		{"INTERRUPT", e(storage.CodeInterrupt), false},
		{"plain error", errors.New("boom"), false},
		{"io.EOF", io.EOF, false},
		{"context.Canceled", context.Canceled, false},
		{"context.DeadlineExceeded", context.DeadlineExceeded, false},
		{"wrapped context.Canceled", fmt.Errorf("tx: %w", context.Canceled), false},
		{"FULL joined with context.Canceled", errors.Join(e(storage.CodeFull), context.Canceled), false},
		{"BUSY wrapping context.Canceled", &storage.Error{Code: storage.CodeBusy, Err: context.Canceled}, false},
		{"two transient joined", errors.Join(e(storage.CodeFull), e(ioerrWrite)), true},
		{"two transient in one %w %w", fmt.Errorf("a: %w, b: %w", e(storage.CodeBusy), e(storage.CodeLocked)), true},
		{"joined then wrapped", fmt.Errorf("commit: %w", errors.Join(e(storage.CodeBusy), e(storage.CodeFull))), true},
		{"nested joins", errors.Join(e(storage.CodeBusy), errors.Join(e(storage.CodeFull), fmt.Errorf("x: %w", e(ioerrRead)))), true},
		{"transient joined with permanent", errors.Join(e(storage.CodeFull), e(storage.CodeConstraint)), false},
		{"transient joined with a plain error", errors.Join(e(storage.CodeBusy), errors.New("boom")), false},
		{"transient whose host detail is a join", &storage.Error{Code: storage.CodeBusy, Err: errors.Join(errors.New("a"), errors.New("b"))}, true},
		{"permanent wrapping a transient host detail", &storage.Error{Code: storage.CodeConstraint, Err: e(storage.CodeBusy)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.transient, storage.IsTransient(tc.err))
		})
	}
}

func TestFitsJSNumber(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 1<<53 - 1, -(1<<53 - 1), 1 << 53, 1 << 62, math.MinInt64} {
		assert.True(t, storage.FitsJSNumber(n), "%d", n)
	}
	for _, n := range []int64{1<<53 + 1, -(1<<53 + 1), math.MaxInt64, 1<<62 + 1} {
		assert.False(t, storage.FitsJSNumber(n), "%d", n)
	}
}
