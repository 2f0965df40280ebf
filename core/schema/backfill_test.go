package schema_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/core/storage"
)

// migrateTo applies the migrations up to version v, as a build of that
// version would have, statement by statement.
func migrateTo(t *testing.T, db storage.DB, v int) {
	t.Helper()
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		if _, err := tx.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return err
		}
		for _, m := range schema.Migrations() {
			if m.Version > v {
				break
			}
			for _, stmt := range strings.Split(m.SQL, ";\n") {
				var code []string // the statement without its comment lines
				for _, line := range strings.Split(stmt, "\n") {
					if !strings.HasPrefix(strings.TrimSpace(line), "--") {
						code = append(code, line)
					}
				}
				if strings.TrimSpace(strings.Join(code, "")) == "" {
					continue
				}
				if _, err := tx.Exec(strings.Join(code, "\n")); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.Version, now); err != nil {
				return err
			}
		}
		return nil
	}))
}

// Migration 0009 fills jobs.background from the session.job.started@1 that
// started each job (not from the call's arguments), and blockers.child_id
// from each task blocker's request, for rows written before it.
func TestMigration9BackfillsFromTheLog(t *testing.T) {
	db, _ := newDB(t)
	migrateTo(t, db, 8)
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		for _, q := range []string{
			`INSERT INTO events (session_id, seq, id, type, at, data) VALUES
				('r', 1, 'e1', 'session.job.started@1', 0, '{"child_id":"r.1","call_id":"c1","background":true}'),
				('r', 2, 'e2', 'session.job.started@1', 0, '{"child_id":"r.2","call_id":"c2"}')`,
			// c1's arguments read background false by SQL: the event decides.
			`INSERT INTO jobs (child_id, parent_id, call_id, state) VALUES ('r.1', 'r', 'c1', 'running'), ('r.2', 'r', 'c2', 'running')`,
			`INSERT INTO blockers (id, session_id, root_id, prompt_id, step_id, call_id, kind, adapter, ordinal, state, request, created_seq, created_at) VALUES
				('t-c2-0', 'r', 'r', 'p', 's', 'c2', 'task', 'task@1', 0, 'pending', '{"child_id":"r.2","prompt_id":"p2"}', 3, 0),
				('q-c3-0', 'r', 'r', 'p', 's', 'c3', 'question', 'question@1', 0, 'pending', '{"child_id":"nope"}', 3, 0)`,
		} {
			if _, err := tx.Exec(q); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, schema.Migrate(ctx, db, now))

	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		var bg1, bg2 int
		if _, err := storage.QueryRow(tx, `SELECT (SELECT background FROM jobs WHERE child_id = 'r.1'), (SELECT background FROM jobs WHERE child_id = 'r.2')`, nil, &bg1, &bg2); err != nil {
			return err
		}
		assert.Equal(t, 1, bg1, "started in the background")
		assert.Equal(t, 0, bg2, "started in the foreground (the flag omitted)")
		var task, question string
		if _, err := storage.QueryRow(tx, `SELECT (SELECT COALESCE(child_id, '') FROM blockers WHERE id = 't-c2-0'), (SELECT COALESCE(child_id, '') FROM blockers WHERE id = 'q-c3-0')`, nil, &task, &question); err != nil {
			return err
		}
		assert.Equal(t, "r.2", task)
		assert.Empty(t, question, "only task blockers name a child")
		return nil
	}))
}

// Migration 0011's indexes hold the rows stored before it: the messages
// of each session but its tool results, and its tool calls, as the
// runner counts them from the indexes alone (runner.requestMessages).
func TestMigration11IndexesTheStoredTranscripts(t *testing.T) {
	db, _ := newDB(t)
	migrateTo(t, db, 10)
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		for _, q := range []string{
			`INSERT INTO messages (id, session_id, seq, role, text, created_at, tool_call_id) VALUES
				('a1', 'a', 1, 'user', 'hi', 0, NULL), ('a2', 'a', 2, 'assistant', '', 0, NULL),
				('c1.result', 'a', 4, 'tool', 'out', 0, 'c1'), ('a5', 'a', 5, 'notice', 'n', 0, NULL),
				('b1', 'b', 1, 'user', 'hi', 0, NULL), ('c3.result', 'b', 3, 'tool', 'out', 0, 'c3')`,
			`INSERT INTO tool_calls (id, session_id, step_id, idx, name, arguments, phase) VALUES
				('c1', 'a', 'a2', 0, 'f', '{}', 'settled'), ('c2', 'a', 'a2', 1, 'f', '{}', 'called'),
				('c3', 'b', 'b2', 0, 'f', '{}', 'settled')`,
		} {
			if _, err := tx.Exec(q); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, schema.Migrate(ctx, db, now))

	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		var sent, calls int
		var seqs string
		if _, err := storage.QueryRow(tx, `SELECT
			(SELECT count(*) FROM messages INDEXED BY messages_sent WHERE session_id = 'a' AND role != 'tool'),
			(SELECT group_concat(seq) FROM (SELECT seq FROM messages INDEXED BY messages_sent WHERE session_id = 'a' AND role != 'tool' ORDER BY seq DESC)),
			(SELECT count(*) FROM tool_calls INDEXED BY tool_calls_by_session WHERE session_id = 'a')`, nil, &sent, &seqs, &calls); err != nil {
			return err
		}
		assert.Equal(t, 3, sent, "session a's messages but its tool result")
		assert.Equal(t, "5,2,1", seqs, "newest first")
		assert.Equal(t, 2, calls, "session a's tool calls")
		var check string
		if _, err := storage.QueryRow(tx, `PRAGMA integrity_check`, nil, &check); err != nil {
			return err
		}
		assert.Equal(t, "ok", check)
		return nil
	}))
}
