package schema

import (
	"context"
	_ "embed" // the migrations' //go:embed strings
	"fmt"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/core/storage"
)

//go:embed migrations/0001_init.sql
var m0001 string

//go:embed migrations/0002_steps_tools.sql
var m0002 string

//go:embed migrations/0003_kv_retries.sql
var m0003 string

//go:embed migrations/0004_event_order.sql
var m0004 string

//go:embed migrations/0005_retried_steps.sql
var m0005 string

//go:embed migrations/0006_epoch_owner.sql
var m0006 string

//go:embed migrations/0007_blockers.sql
var m0007 string

//go:embed migrations/0008_permission_rules.sql
var m0008 string

//go:embed migrations/0009_jobs_background.sql
var m0009 string

//go:embed migrations/0010_steps_by_session.sql
var m0010 string

//go:embed migrations/0011_context_plan.sql
var m0011 string

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// migrations lists every file of migrations/, in order; adding a file
// means adding its //go:embed string above and its line here (a test
// compares this with the directory). Strings, not an embed.FS: reading
// an FS links io/fs's directory code and its sorts into the wasm guest,
// about 23 KB of its gzip size (docs/RATIONALE.md, "A lean guest").
var migrations = []Migration{
	{1, "0001_init.sql", m0001},
	{2, "0002_steps_tools.sql", m0002},
	{3, "0003_kv_retries.sql", m0003},
	{4, "0004_event_order.sql", m0004},
	{5, "0005_retried_steps.sql", m0005},
	{6, "0006_epoch_owner.sql", m0006},
	{7, "0007_blockers.sql", m0007},
	{8, "0008_permission_rules.sql", m0008},
	{9, "0009_jobs_background.sql", m0009},
	{10, "0010_steps_by_session.sql", m0010},
	{11, "0011_context_plan.sql", m0011},
}

// Migrations returns the embedded migrations in order.
func Migrations() []Migration { return slices.Clone(migrations) }

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
