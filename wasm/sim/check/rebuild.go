package check

import (
	"context"
	"fmt"
	"reflect"

	"github.com/ncruces/go-sqlite3"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/core/storage"
)

// projectionDiff is the first row of one projection table that differs
// from its rebuild.
type projectionDiff struct {
	table, key, session string
	stored, rebuilt     []any // nil when the row is missing on that side
}

// rebuildDiffs replays src's log into a private in-memory database with
// core's schema and projector and compares every projection table with
// src's. The judged file is only read.
func rebuildDiffs(src conn) ([]projectionDiff, error) {
	ctx := context.Background()
	var version int
	if err := src.Tx(ctx, func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`, nil, &version)
		return err
	}); err != nil {
		return nil, fmt.Errorf("rebuild: read schema version: %w", err)
	}
	if version != schema.Latest() {
		// Column layouts differ across versions; comparing them would report
		// the migration, not the history.
		return nil, fmt.Errorf("rebuild: database at schema %d, the checker knows %d", version, schema.Latest())
	}
	mc, err := sqlite3.Open(":memory:")
	if err != nil {
		return nil, fmt.Errorf("rebuild: open memory: %w", err)
	}
	defer mc.Close()
	mem := conn{mc}
	if err := schema.Migrate(ctx, mem, 0); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	var events *storage.Rows
	if err := src.Tx(ctx, func(tx storage.Tx) error {
		events, err = tx.Query(`SELECT session_id, seq, id, type, at, data, gseq FROM events`)
		return err
	}); err != nil {
		return nil, fmt.Errorf("rebuild: read log: %w", err)
	}
	if err := mem.Tx(ctx, func(tx storage.Tx) error {
		for _, r := range events.Values {
			if _, err := tx.Exec(`INSERT INTO events (session_id, seq, id, type, at, data, gseq) VALUES (?, ?, ?, ?, ?, ?, ?)`, r...); err != nil {
				return err
			}
		}
		return core.Rebuild(tx)
	}); err != nil {
		// The log itself cannot be replayed (two events the projector
		// refuses together, such as a call settled twice): a finding
		// about the history, not a failure of the check.
		return nil, &replayError{err: err}
	}

	var diffs []projectionDiff
	for _, table := range core.ProjectionTables {
		stored, err := dump(src, table)
		if err != nil {
			return nil, err
		}
		rebuilt, err := dump(mem, table)
		if err != nil {
			return nil, err
		}
		if d, ok := firstDiff(table, stored, rebuilt); ok {
			diffs = append(diffs, d)
		}
	}
	return diffs, nil
}

// replayError is a log that core's projector refuses to replay.
type replayError struct{ err error }

func (e *replayError) Error() string { return "rebuild: " + e.err.Error() }
func (e *replayError) Unwrap() error { return e.err }

func dump(db conn, table string) (*storage.Rows, error) {
	var rows *storage.Rows
	err := db.Tx(context.Background(), func(tx storage.Tx) error {
		var err error
		rows, err = tx.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rebuild: read %s: %w", table, err)
	}
	return rows, nil
}

// firstDiff compares two dumps keyed by their first column (every
// projection's primary key).
func firstDiff(table string, stored, rebuilt *storage.Rows) (projectionDiff, bool) {
	index := func(r *storage.Rows) map[string][]any {
		m := make(map[string][]any, len(r.Values))
		for _, row := range r.Values {
			m[fmt.Sprint(row[0])] = row
		}
		return m
	}
	sessionCol := -1
	for i, c := range stored.Columns {
		if c == "session_id" || (table == "sessions" && c == "id") {
			sessionCol = i
		}
	}
	mk := func(key string, s, r []any) projectionDiff {
		d := projectionDiff{table: table, key: key, stored: s, rebuilt: r}
		if row := s; sessionCol >= 0 {
			if row == nil {
				row = r
			}
			d.session = fmt.Sprint(row[sessionCol])
		}
		return d
	}
	rb := index(rebuilt)
	for _, row := range stored.Values {
		key := fmt.Sprint(row[0])
		other, ok := rb[key]
		if !ok || !reflect.DeepEqual(row, other) {
			return mk(key, row, other), true
		}
	}
	st := index(stored)
	for _, row := range rebuilt.Values {
		key := fmt.Sprint(row[0])
		if _, ok := st[key]; !ok {
			return mk(key, nil, row), true
		}
	}
	return projectionDiff{}, false
}
