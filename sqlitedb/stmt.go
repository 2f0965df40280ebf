package sqlitedb

import (
	"fmt"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core/storage"
)

// Bind binds args, in order, to the statement's parameters: nil, int64,
// int, bool, float64, string or []byte, the values core passes. Other
// connections over ncruces (the simulator's, the checker's) bind with it
// too, so every connection accepts the same values.
func Bind(s *sqlite3.Stmt, args []any) error {
	if len(args) != s.BindCount() {
		return fmt.Errorf("bind: %d arguments for %d parameters", len(args), s.BindCount())
	}
	for i, a := range args {
		p := i + 1
		var err error
		switch v := a.(type) {
		case nil:
			err = s.BindNull(p)
		case int64:
			err = s.BindInt64(p, v)
		case int:
			err = s.BindInt64(p, int64(v))
		case bool:
			err = s.BindBool(p, v)
		case float64:
			err = s.BindFloat(p, v)
		case string:
			err = s.BindText(p, v)
		case []byte:
			err = s.BindBlob(p, v)
		default:
			return fmt.Errorf("bind parameter %d: unsupported type %T", p, a)
		}
		if err != nil {
			return fmt.Errorf("bind parameter %d: %w", p, mapErr(err))
		}
	}
	return nil
}

// ReadRows steps the bound statement to its end and returns every row as
// storage.Rows (nil, int64, float64, string or []byte per value). The
// caller resets or closes the statement. A failure is a StorageError.
func ReadRows(s *sqlite3.Stmt) (*storage.Rows, error) {
	n := s.ColumnCount()
	rows := &storage.Rows{Columns: make([]string, n)}
	for i := range n {
		rows.Columns[i] = s.ColumnName(i)
	}
	for s.Step() {
		row := make([]any, n)
		for i := range n {
			switch s.ColumnType(i) {
			case sqlite3.INTEGER:
				row[i] = s.ColumnInt64(i)
			case sqlite3.FLOAT:
				row[i] = s.ColumnFloat(i)
			case sqlite3.TEXT:
				row[i] = s.ColumnText(i)
			case sqlite3.BLOB:
				row[i] = s.ColumnBlob(i, nil)
			}
		}
		rows.Values = append(rows.Values, row)
	}
	if err := s.Err(); err != nil {
		return nil, mapErr(err)
	}
	return rows, nil
}
