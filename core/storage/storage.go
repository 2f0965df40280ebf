package storage

import (
	"context"
	"database/sql"
	"fmt"
)

// DB is a tree's database as core sees it.
type DB interface {
	// Tx runs fn in one transaction. If fn returns an error the transaction is
	// rolled back and that error is returned unchanged; if fn panics it is
	// rolled back and the panic goes on; otherwise it commits and a commit
	// failure is returned (a failed commit never leaves the transaction
	// open). The context bounds waiting for the database (busy handling),
	// not fn's statements once they run. core/storage/storagetest is the
	// suite every implementation runs.
	Tx(ctx context.Context, fn func(Tx) error) error
}

// Tx is one open transaction. It is valid only inside the callback that
// received it.
type Tx interface {
	// Exec runs a statement that returns no rows and reports how many rows
	// it changed.
	Exec(query string, args ...any) (changed int64, err error)
	// Query runs a statement and returns all its rows, already read.
	Query(query string, args ...any) (*Rows, error)
}

// Rows is a fully read result set. Reading everything before returning keeps
// the contract free of cursors that outlive a host call (the wasm ABI and the
// Durable Object bridge both materialize results anyway).
type Rows struct {
	Columns []string
	Values  [][]any // each value is nil, int64, float64, string or []byte
	next    int
}

// Next advances to the next row; call it before the first Scan.
func (r *Rows) Next() bool {
	if r == nil {
		return false
	}
	if r.next >= len(r.Values) {
		r.next = len(r.Values) + 1 // exhausted: Scan has no current row
		return false
	}
	r.next++
	return true
}

// Len is the number of rows.
func (r *Rows) Len() int {
	if r == nil {
		return 0
	}
	return len(r.Values)
}

// Scan copies the current row into dest. Supported destinations: *string,
// *int64, *int, *bool, *[]byte, *any, *sql.NullString, *sql.NullInt64. NULL
// scans as the zero value into the plain types.
func (r *Rows) Scan(dest ...any) error {
	if r.next == 0 || r.next > len(r.Values) {
		return fmt.Errorf("scan rows: no current row")
	}
	row := r.Values[r.next-1]
	if len(dest) != len(row) {
		return fmt.Errorf("scan rows: %d destinations for %d columns", len(dest), len(row))
	}
	for i, v := range row {
		if err := scanValue(dest[i], v); err != nil {
			return fmt.Errorf("scan column %d: %w", i, err)
		}
	}
	return nil
}

// QueryRow runs query and scans its first row into dest. It reports found =
// false, and leaves dest alone, when there is no row.
func QueryRow(tx Tx, query string, args []any, dest ...any) (found bool, err error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return false, err
	}
	if !rows.Next() {
		return false, nil
	}
	return true, rows.Scan(dest...)
}

func scanValue(dest, v any) error {
	switch d := dest.(type) {
	case *any:
		*d = v
	case *string:
		switch x := v.(type) {
		case nil:
			*d = ""
		case string:
			*d = x
		case []byte:
			*d = string(x)
		default:
			return fmt.Errorf("cannot scan %T into string", v)
		}
	case *[]byte:
		switch x := v.(type) {
		case nil:
			*d = nil
		case []byte:
			*d = append([]byte(nil), x...)
		case string:
			*d = []byte(x)
		default:
			return fmt.Errorf("cannot scan %T into []byte", v)
		}
	case *int64:
		n, err := toInt(v)
		*d = n
		return err
	case *int:
		n, err := toInt(v)
		*d = int(n)
		return err
	case *bool:
		n, err := toInt(v)
		*d = n != 0
		return err
	case *sql.NullString:
		if v == nil {
			*d = sql.NullString{}
			return nil
		}
		d.Valid = true
		return scanValue(&d.String, v)
	case *sql.NullInt64:
		if v == nil {
			*d = sql.NullInt64{}
			return nil
		}
		d.Valid = true
		return scanValue(&d.Int64, v)
	default:
		return fmt.Errorf("unsupported destination %T", dest)
	}
	return nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		return x, nil
	case float64:
		return int64(x), nil
	default:
		return 0, fmt.Errorf("cannot scan %T into an integer", v)
	}
}

// FitsJSNumber reports whether a JS number (a float64) holds n exactly,
// which is what a Durable Object can bind: its SQL arguments are JS
// numbers, and it refuses an integer that would round rather than store
// another. Every integer within ±(2^53-1) fits; past that, only those a
// float64 holds exactly and converts back, such as core's open upper
// bound 1<<62 (math.MaxInt64 does not: it rounds to 2^63).
func FitsJSNumber(n int64) bool {
	if n <= 1<<53-1 && n >= -(1<<53-1) {
		return true
	}
	f := float64(n)
	return f < 1<<63 && int64(f) == n
}
