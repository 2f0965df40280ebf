package schema_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
)

var ctx = context.Background()

const now = int64(1767225600000) // 2026-01-01T00:00:00Z in ms

func open(t *testing.T, path string) *sqlitedb.DB {
	t.Helper()
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func newDB(t *testing.T) (*sqlitedb.DB, string) {
	path := filepath.Join(t.TempDir(), "tree.db")
	return open(t, path), path
}

// snapshot is everything a write could change that a test can see: the
// schema objects with their SQL, and every table's full contents.
func snapshot(t *testing.T, db storage.DB) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master ORDER BY type, name`)
		if err != nil {
			return err
		}
		var tables []string
		for rows.Next() {
			var typ, name, tbl, sql string
			if err := rows.Scan(&typ, &name, &tbl, &sql); err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s %s on %s: %s\n", typ, name, tbl, sql)
			if typ == "table" {
				tables = append(tables, name)
			}
		}
		for _, name := range tables {
			rows, err := tx.Query(`SELECT * FROM "` + name + `"`)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "table %s: %d rows\n", name, rows.Len())
			for rows.Next() {
				vals := make([]any, len(rows.Columns))
				ptrs := make([]any, len(vals))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return err
				}
				fmt.Fprintf(&b, "  %v\n", vals)
			}
		}
		return nil
	}))
	return b.String()
}

func TestMigrateFreshReachesLatest(t *testing.T) {
	db, _ := newDB(t)
	v, err := schema.Version(ctx, db)
	require.NoError(t, err)
	assert.Zero(t, v, "a new database is at version 0")

	require.NoError(t, schema.Migrate(ctx, db, now))
	v, err = schema.Version(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, schema.Latest(), v)

	// Every applied step is recorded with the host's timestamp.
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT version, applied_at FROM schema_migrations ORDER BY version`)
		if err != nil {
			return err
		}
		var got []int
		for rows.Next() {
			var v int
			var at int64
			if err := rows.Scan(&v, &at); err != nil {
				return err
			}
			assert.Equal(t, now, at)
			got = append(got, v)
		}
		var want []int
		for _, m := range schema.Migrations() {
			want = append(want, m.Version)
		}
		assert.Equal(t, want, got)
		return nil
	}))
}

func TestVersionDoesNotWrite(t *testing.T) {
	db, _ := newDB(t)
	before := snapshot(t, db)
	_, err := schema.Version(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, before, snapshot(t, db))
}

func TestMigrateTwiceIsNoOp(t *testing.T) {
	db, path := newDB(t)
	require.NoError(t, schema.Migrate(ctx, db, now))
	first := snapshot(t, db)
	// A later boot with another timestamp, on the same connection and on a
	// fresh one, changes nothing (not even applied_at).
	require.NoError(t, schema.Migrate(ctx, db, now+1000))
	assert.Equal(t, first, snapshot(t, db))
	db2 := open(t, path)
	require.NoError(t, schema.Migrate(ctx, db2, now+2000))
	assert.Equal(t, first, snapshot(t, db2))
}

// A database written by a newer schema is refused with ErrNewerSchema, and
// nothing is written: not the tables this build would create, not a version
// row, not a byte of the file.
func TestNewerSchemaRefusedBeforeAnyWrite(t *testing.T) {
	newer := int64(schema.Latest() + 1)
	for name, setup := range map[string]func(tx storage.Tx) error{
		// A newer build migrated fully, then added its own step.
		"migrated then newer": func(tx storage.Tx) error {
			_, err := tx.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, newer, now)
			return err
		},
		// Only the version table: had Migrate not read it first, it would
		// create every table of this build.
		"version table only": func(tx storage.Tx) error {
			if _, err := tx.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, newer, now)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tree.db")
			setupDB, err := sqlitedb.Open(path, sqlitedb.Options{})
			require.NoError(t, err)
			if name == "migrated then newer" {
				require.NoError(t, schema.Migrate(ctx, setupDB, now))
			}
			require.NoError(t, setupDB.Tx(ctx, setup))
			require.NoError(t, setupDB.Close()) // checkpoints: the whole database is in the main file now
			fileBefore, err := os.ReadFile(path)
			require.NoError(t, err)

			db, err := sqlitedb.Open(path, sqlitedb.Options{})
			require.NoError(t, err)
			before := snapshot(t, db)
			err = schema.Migrate(ctx, db, now+1000)
			require.ErrorIs(t, err, storage.ErrNewerSchema)
			assert.Equal(t, before, snapshot(t, db), "nothing written through SQL")
			require.NoError(t, db.Close())

			fileAfter, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, fileBefore, fileAfter, "the database file is byte for byte the same")
			_, err = os.Stat(path + "-wal")
			assert.True(t, os.IsNotExist(err), "no WAL left behind: %v", err)
		})
	}
}

var createRe = regexp.MustCompile(`(?i)CREATE\s+(UNIQUE\s+)?(TABLE|INDEX)\s+(IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)`)

// Every table and index the migrations create exists after Migrate, plus the
// version table.
func TestAllMigrationObjectsExist(t *testing.T) {
	db, _ := newDB(t)
	require.NoError(t, schema.Migrate(ctx, db, now))
	want := map[string]string{"schema_migrations": "table"}
	for _, m := range schema.Migrations() {
		for _, match := range createRe.FindAllStringSubmatch(m.SQL, -1) {
			want[match[4]] = strings.ToLower(match[2])
		}
	}
	for _, table := range []string{"tree", "events", "sessions", "prompts", "messages", "jobs", "claims"} {
		assert.Equal(t, "table", want[table], "migrations create %s", table)
	}
	got := map[string]string{}
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		rows, err := tx.Query(`SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var typ, name string
			if err := rows.Scan(&typ, &name); err != nil {
				return err
			}
			got[name] = typ
		}
		return nil
	}))
	assert.Equal(t, want, got)

	var epoch int64
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		found, err := storage.QueryRow(tx, `SELECT epoch FROM tree WHERE singleton = 1`, nil, &epoch)
		assert.True(t, found, "the tree row is seeded")
		return err
	}))
	assert.Zero(t, epoch)
}

// Migrations are numbered from 1 without gaps or duplicates, so every host
// applies the same steps in the same order.
func TestMigrationsNumberedContiguously(t *testing.T) {
	ms := schema.Migrations()
	require.NotEmpty(t, ms)
	for i, m := range ms {
		assert.Equal(t, i+1, m.Version, "migration %s", m.Name)
		assert.Regexp(t, `^\d{4}_[a-z0-9_]+\.sql$`, m.Name)
		assert.NotEmpty(t, strings.TrimSpace(m.SQL))
	}
	assert.Equal(t, ms[len(ms)-1].Version, schema.Latest())
}

// Migrations lists exactly the files of migrations/, each with its file's
// text: a file added without its line in the table would never be applied.
func TestMigrationsListEveryFile(t *testing.T) {
	entries, err := os.ReadDir("migrations")
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	var listed []string
	for _, m := range schema.Migrations() {
		listed = append(listed, m.Name)
		body, err := os.ReadFile(filepath.Join("migrations", m.Name))
		require.NoError(t, err)
		assert.Equal(t, string(body), m.SQL, "migration %s", m.Name)
	}
	assert.Equal(t, files, listed, "core/schema/schema.go's migrations table and the migrations directory")
}

// scriptDB hands Migrate a ScriptTx, as a Durable Object's DB does. Its
// ExecScript runs the script statement by statement on the underlying
// transaction (local SQLite's Exec takes one statement), failing at
// statement failAt (1-based; 0: never) after running the ones before it.
type scriptDB struct {
	storage.DB
	failAt         int
	scripts, execs int
}

func (d *scriptDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	return d.DB.Tx(ctx, func(tx storage.Tx) error { return fn(&scriptTx{Tx: tx, db: d}) })
}

type scriptTx struct {
	storage.Tx
	db *scriptDB
}

func (t *scriptTx) Exec(query string, args ...any) (int64, error) {
	t.db.execs++
	return t.Tx.Exec(query, args...)
}

func (t *scriptTx) ExecScript(script string) error {
	t.db.scripts++
	for i, stmt := range strings.SplitAfter(strings.TrimSpace(script), ";\n") {
		if i+1 == t.db.failAt {
			return errors.New("planted failure")
		}
		if _, err := t.Tx.Exec(strings.TrimSpace(stmt)); err != nil {
			return err
		}
	}
	return nil
}

// A host whose transaction runs scripts gets the same database from one
// call as from the statement-by-statement path, and none once up to date.
func TestMigrateAsOneScript(t *testing.T) {
	plain, _ := newDB(t)
	require.NoError(t, schema.Migrate(ctx, plain, now))

	base, path := newDB(t)
	db := &scriptDB{DB: base}
	require.NoError(t, schema.Migrate(ctx, db, now))
	assert.Equal(t, 1, db.scripts, "every migration in one script")
	assert.Zero(t, db.execs, "no statement-by-statement call")
	assert.Equal(t, snapshot(t, plain), snapshot(t, base))

	again := &scriptDB{DB: open(t, path)}
	require.NoError(t, schema.Migrate(ctx, again, now+1000))
	assert.Zero(t, again.scripts+again.execs, "an up-to-date database is only read")
	assert.Equal(t, snapshot(t, plain), snapshot(t, again.DB))
}

// A script that fails midway leaves nothing: the statements it ran roll
// back with the transaction, and the next boot applies everything.
func TestMigrateScriptFailureRollsBack(t *testing.T) {
	base, _ := newDB(t)
	before := snapshot(t, base)
	db := &scriptDB{DB: base, failAt: 5}
	err := schema.Migrate(ctx, db, now)
	require.ErrorContains(t, err, "planted failure")
	assert.Equal(t, before, snapshot(t, base), "nothing written")

	db.failAt = 0
	require.NoError(t, schema.Migrate(ctx, db, now))
	v, err := schema.Version(ctx, base)
	require.NoError(t, err)
	assert.Equal(t, schema.Latest(), v)
}

// A database an older build left at any version gets, as one script, the
// same database as from the statement-by-statement path: only the later
// migrations run, each recorded once.
func TestMigrateAsOneScriptFromEveryVersion(t *testing.T) {
	for v := 1; v < schema.Latest(); v++ {
		plain, _ := newDB(t)
		migrateTo(t, plain, v)
		require.NoError(t, schema.Migrate(ctx, plain, now+1000), "version %d", v)

		base, _ := newDB(t)
		migrateTo(t, base, v)
		db := &scriptDB{DB: base}
		require.NoError(t, schema.Migrate(ctx, db, now+1000), "version %d", v)
		assert.Equal(t, 1, db.scripts, "version %d", v)
		assert.Equal(t, snapshot(t, plain), snapshot(t, base), "version %d", v)
	}
}

// Migrations returns a copy: a caller that edits it changes neither the
// next caller's list nor what Migrate applies.
func TestMigrationsReturnsACopy(t *testing.T) {
	ms := schema.Migrations()
	want := ms[0]
	ms[0].SQL = "DROP TABLE tree;"
	ms[len(ms)-1].Version = 999
	assert.Equal(t, want, schema.Migrations()[0])
	assert.Equal(t, len(ms), schema.Latest())
}
