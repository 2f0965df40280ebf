package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
)

// An index written by the second schema (trees with ready, no create
// keys) is migrated at Open: its ready trees stay listed, and a keyed
// create records its key, so that its retry is answered its tree.
func TestIndexFromTheSecondSchemaIsMigrated(t *testing.T) {
	e := newEnv(t)
	e.execIndex( // version 2, as it was written
		`CREATE TABLE trees (id TEXT PRIMARY KEY, principal TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID`,
		`CREATE INDEX trees_by_principal ON trees (principal, created_at DESC, id)`,
		`CREATE TABLE wakeups (tree_id TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID`,
		`ALTER TABLE trees ADD COLUMN ready INTEGER NOT NULL DEFAULT 1`,
		`INSERT INTO trees (id, principal, created_at, ready) VALUES ('old', 'alice', 1, 1)`,
		`PRAGMA user_version = 2`,
	)

	h := e.open(e.config())
	key := api.CreateKey{Key: "k", Digest: "d"}
	id, err := h.CreateKeyed(ctx, "new", "alice", key, rootSession("new", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "new", id)
	id, err = h.CreateKeyed(ctx, "again", "alice", key, rootSession("again", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "new", id, "the retry is answered the first create's tree")
	assert.Equal(t, []string{"new", "old"}, listIDs(t, h, "alice"))
}
