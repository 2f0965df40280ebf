package storagetest

import (
	"bytes"
	"database/sql"
	"math"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/conform"
	"github.com/revenantrt/revenant/core/storage"
)

var valueCases = []testCase{
	{"each value round-trips with its SQLite type", valuesRoundTrip},
	{"int and bool arguments bind as integers", intAndBoolBind},
	{"an unsupported argument is an error", unsupportedArgument},
	{"a wrong argument count is an error", wrongArgumentCount},
	{"Exec reports the rows it changed", execCountsChanges},
	{"a query of no rows has its columns and no row", queryNoRows},
	{"columns are named as the query names them", columnNames},
	{"Scan reads each value into every destination", scanDestinations},
}

// sample is one value stored and read back: the Go value read must equal
// in and have its type (nil, int64, float64, string, []byte), the one
// SQLite's typeof names.
type sample struct {
	name   string
	in     any
	typeof string
}

var samples = []sample{
	{"NULL", nil, "null"},
	{"zero", int64(0), "integer"},
	{"negative", int64(-42), "integer"},
	{"max int64", int64(math.MaxInt64), "integer"},
	{"min int64", int64(math.MinInt64), "integer"},
	{"2^53+1, past float64's precision", int64(1)<<53 + 1, "integer"},
	{"float", 2.5, "real"},
	{"integral float", 3.0, "real"},
	{"tiny negative float", -1.25e-300, "real"},
	{"max float64", math.MaxFloat64, "real"},
	{"empty string", "", "text"},
	{"string", "text", "text"},
	{"unicode", "héllo, 世界 🎉 \u2028 \"quoted\"", "text"},
	{"empty blob", []byte{}, "blob"},
	{"blob", []byte{0, 1, 2, 0xfe, 0xff}, "blob"},
	{"64 KiB blob", bytes.Repeat([]byte{0xa5, 0}, 32<<10), "blob"},
}

func valuesRoundTrip(t conform.T, newDB NewDB) {
	db := newDB(t)
	// x has no declared type, so SQLite stores each value as it came.
	exec(t, db, `CREATE TABLE s (k INTEGER PRIMARY KEY, x)`)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		for i, s := range samples {
			if _, err := tx.Exec(`INSERT INTO s VALUES (?, ?)`, int64(i), s.in); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT k, x, typeof(x) FROM s ORDER BY k`)
		if err != nil {
			return err
		}
		require.Equal(t, len(samples), rows.Len())
		for i, s := range samples {
			row := rows.Values[i]
			assert.Equal(t, int64(i), row[0], s.name)
			assert.Equal(t, s.typeof, row[2], "%s: stored as", s.name)
			assertSame(t, s, row[1])
			// The value binds as an argument to the same effect.
			var n int64
			found, err := storage.QueryRow(tx, `SELECT count(*) FROM s WHERE x IS ?`, []any{s.in}, &n)
			if err != nil {
				return err
			}
			assert.True(t, found && n == 1, "%s: WHERE x IS ? matched %d rows", s.name, n)
		}
		return nil
	}))
}

// assertSame checks a value read back is s.in, of s.in's type. An empty
// blob may read back as a nil []byte: the contract promises a []byte of the
// same bytes, not a particular slice header.
func assertSame(t conform.T, s sample, got any) {
	t.Helper()
	switch in := s.in.(type) {
	case nil:
		assert.Nil(t, got, s.name)
	case []byte:
		b, ok := got.([]byte)
		assert.True(t, ok && bytes.Equal(in, b), "%s: read back %T %v", s.name, got, got)
	default:
		assert.IsType(t, s.in, got, "%s: read back as", s.name)
		assert.Equal(t, s.in, got, s.name)
	}
}

func intAndBoolBind(t conform.T, newDB NewDB) {
	db := newDB(t)
	exec(t, db, `CREATE TABLE s (k INTEGER PRIMARY KEY, x)`)
	exec(t, db, `INSERT INTO s VALUES (1, ?), (2, ?), (3, ?), (4, ?)`, 7, -7, true, false)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT x, typeof(x) FROM s ORDER BY k`)
		if err != nil {
			return err
		}
		assert.Equal(t, [][]any{{int64(7), "integer"}, {int64(-7), "integer"}, {int64(1), "integer"}, {int64(0), "integer"}}, rows.Values)
		return nil
	}))
}

func unsupportedArgument(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	for name, arg := range map[string]any{"struct": struct{}{}, "uint64": uint64(1), "*string": new(string)} {
		err := db.Tx(bg, func(tx storage.Tx) error {
			if _, err := tx.Exec(`INSERT INTO v VALUES ('before')`); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO v VALUES (?)`, arg)
			return err
		})
		assert.Error(t, err, name)
	}
	assert.Equal(t, "", names(t, db), "each transaction rolled back")
}

func wrongArgumentCount(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	for name, args := range map[string][]any{"too few": nil, "too many": {"a", "b"}} {
		err := db.Tx(bg, func(tx storage.Tx) error {
			_, err := tx.Exec(`INSERT INTO v VALUES (?)`, args...)
			return err
		})
		assert.Error(t, err, name)
	}
	exec(t, db, `INSERT INTO v VALUES (?)`, "right")
	assert.Equal(t, "right", names(t, db))
}

func execCountsChanges(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		for _, step := range []struct {
			query   string
			changed int64
		}{
			{`INSERT INTO v VALUES ('a')`, 1},
			{`INSERT INTO v VALUES ('b'), ('c')`, 2},
			{`UPDATE v SET who = who || '!'`, 3},
			{`UPDATE v SET who = 'x' WHERE 0`, 0},
			{`INSERT INTO v SELECT who || '?' FROM v`, 3},
			{`DELETE FROM v WHERE who LIKE '%?'`, 3},
			{`DELETE FROM v WHERE who = 'a!'`, 1},
		} {
			n, err := tx.Exec(step.query)
			if err != nil {
				return err
			}
			assert.Equal(t, step.changed, n, step.query)
		}
		return nil
	}))
	assert.Equal(t, "b!,c!", names(t, db))
}

func queryNoRows(t conform.T, newDB NewDB) {
	db := withV(t, newDB)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT who, rowid AS n FROM v`)
		if err != nil {
			return err
		}
		assert.Equal(t, []string{"who", "n"}, rows.Columns)
		assert.Zero(t, rows.Len())
		assert.False(t, rows.Next())
		s := "untouched"
		found, err := storage.QueryRow(tx, `SELECT who FROM v WHERE who = ?`, []any{"nobody"}, &s)
		assert.False(t, found)
		assert.Equal(t, "untouched", s)
		return err
	}))
}

func columnNames(t conform.T, newDB NewDB) {
	db := newDB(t)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT 1 AS one, 'x' AS "two words", NULL AS "ünï"`)
		if err != nil {
			return err
		}
		assert.Equal(t, []string{"one", "two words", "ünï"}, rows.Columns)
		assert.Equal(t, [][]any{{int64(1), "x", nil}}, rows.Values)
		return nil
	}))
}

func scanDestinations(t conform.T, newDB NewDB) {
	db := newDB(t)
	var (
		s          string
		b          []byte
		i64        int64
		i          int
		f, null    any
		yes, no    bool
		ns, nsNull sql.NullString
		ni, niNull sql.NullInt64
	)
	require.NoError(t, db.Tx(bg, func(tx storage.Tx) error {
		found, err := storage.QueryRow(tx, `SELECT 'text', x'00ff', 9007199254740993, -7, 2.5, NULL, 1, 0, 'n', NULL, 9, NULL`, nil,
			&s, &b, &i64, &i, &f, &null, &yes, &no, &ns, &nsNull, &ni, &niNull)
		assert.True(t, found)
		return err
	}))
	assert.Equal(t, "text", s)
	assert.Equal(t, []byte{0, 0xff}, b)
	assert.Equal(t, int64(9007199254740993), i64)
	assert.Equal(t, -7, i)
	assert.Equal(t, 2.5, f)
	assert.Nil(t, null)
	assert.True(t, yes)
	assert.False(t, no)
	assert.Equal(t, sql.NullString{String: "n", Valid: true}, ns)
	assert.Equal(t, sql.NullString{}, nsNull)
	assert.Equal(t, sql.NullInt64{Int64: 9, Valid: true}, ni)
	assert.Equal(t, sql.NullInt64{}, niNull)
}
