package schema

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/core/storage"
)

//go:embed migrations/*.sql
var files embed.FS

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in order.
func Migrations() []Migration {
	entries, err := fs.ReadDir(files, "migrations")
	if err != nil {
		panic(fmt.Sprintf("schema: embedded migrations unreadable: %v", err)) // build defect
	}
	var out []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic(fmt.Sprintf("schema: migration %q is not named NNNN_name.sql", e.Name()))
		}
		body, err := files.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("schema: read %s: %v", e.Name(), err))
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// Latest is the version this build writes.
func Latest() int {
	m := Migrations()
	return m[len(m)-1].Version
}

// Migrate brings db to the latest schema in one transaction. now is the
// timestamp recorded for applied steps (ms, from the host clock). A database
// already at a newer version is refused with storage.ErrNewerSchema before
// anything is written.
func Migrate(ctx context.Context, db storage.DB, now int64) error {
	return db.Tx(ctx, func(tx storage.Tx) error {
		current, err := version(tx)
		if err != nil {
			return err
		}
		latest := Latest()
		if current > latest {
			return fmt.Errorf("migrate: database at version %d, this build knows %d: %w", current, latest, storage.ErrNewerSchema)
		}
		if current == latest {
			return nil
		}
		if st, ok := tx.(ScriptTx); ok {
			return applyScript(st, current, now)
		}
		if _, err := tx.Exec(createVersionTable); err != nil {
			return fmt.Errorf("migrate: create version table: %w", err)
		}
		for _, m := range Migrations() {
			if m.Version <= current {
				continue
			}
			for _, stmt := range splitStatements(m.SQL) {
				if _, err := tx.Exec(stmt); err != nil {
					return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
				}
			}
			if _, err := tx.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, int64(m.Version), now); err != nil {
				return fmt.Errorf("migrate: record %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

const createVersionTable = `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`

// ScriptTx is a storage.Tx that can also run a script of several
// statements, separated by semicolons, in one call (a Durable Object's
// sql.exec does). Where each call crosses into another runtime, Migrate
// applies every pending migration as one script instead of one call per
// statement: a new tree's first boot is then one call, not dozens.
type ScriptTx interface {
	storage.Tx
	// ExecScript runs every statement of script, in order, inside the
	// transaction; an error stops it (the transaction then rolls back).
	ExecScript(script string) error
}

// applyScript applies the migrations after version current, and records
// each, as one script on tx. It runs the same statements as the
// statement-by-statement path, with the version rows' values inlined
// (integers from this build, never input).
func applyScript(tx ScriptTx, current int, now int64) error {
	var b strings.Builder
	b.WriteString(createVersionTable + ";\n")
	var names []string
	for _, m := range Migrations() {
		if m.Version <= current {
			continue
		}
		for _, stmt := range splitStatements(m.SQL) {
			b.WriteString(strings.TrimSuffix(stmt, ";") + ";\n")
		}
		fmt.Fprintf(&b, "INSERT INTO schema_migrations (version, applied_at) VALUES (%d, %d);\n", m.Version, now)
		names = append(names, m.Name)
	}
	if err := tx.ExecScript(b.String()); err != nil {
		return fmt.Errorf("migrate: apply %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}

// Version reads the schema version of db without writing (0 when new).
func Version(ctx context.Context, db storage.DB) (int, error) {
	var v int
	err := db.Tx(ctx, func(tx storage.Tx) error {
		var err error
		v, err = version(tx)
		return err
	})
	return v, err
}

func version(tx storage.Tx) (int, error) {
	var n int
	if _, err := storage.QueryRow(tx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`, nil, &n); err != nil {
		return 0, fmt.Errorf("migrate: read version table: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if _, err := storage.QueryRow(tx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`, nil, &v); err != nil {
		return 0, fmt.Errorf("migrate: read version: %w", err)
	}
	return v, nil
}

// splitStatements splits a migration on semicolons at line ends. Migrations
// keep one statement per ';'-terminated line group and use no triggers, so
// this is enough, and it works on hosts whose exec takes one statement.
func splitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
