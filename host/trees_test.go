package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/sqlitedb"
)

// A tree's created_at, in the list and in what Get returns, is its root
// session's, even when the session is made later than the index row (the
// init took a while): the list says what the session says.
func TestTreeCreatedAtIsTheRootSessions(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	_, err := h.Create(ctx, "t", "alice", func(inst *core.Instance) error {
		e.clock.Advance(time.Second) // the root session comes a second after the row
		_, err := inst.CreateSession(ctx, core.NewSession{ID: "t", Principal: "alice"})
		return err
	})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inst, info, err := h.Get(rctx, "t")
	require.NoError(t, err)
	s, err := inst.Session(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, treeStart(time.Second), s.CreatedAt)
	assert.Equal(t, s.CreatedAt, info.CreatedAt, "Get's info")
	trees, _, err := h.List(ctx, "alice", "", 10)
	require.NoError(t, err)
	require.Len(t, trees, 1)
	assert.Equal(t, s.CreatedAt, trees[0].CreatedAt, "the list")

	// And after a restart, from the index alone.
	require.NoError(t, h.Close(ctx))
	h = e.open(e.config())
	owner, err := h.Owner(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, s.CreatedAt, owner.CreatedAt)
}

// A tree is invisible until its init has made the root session: while
// the init runs, the id has no owner and is not listed, so no request can
// reach a tree without its root.
func TestTreeInvisibleWhileItsInitRuns(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	_, err := h.Create(ctx, "t", "alice", func(inst *core.Instance) error {
		_, err := h.Owner(ctx, "t")
		assert.ErrorIs(t, err, api.ErrTreeNotFound, "owner during init")
		trees, _, err := h.List(ctx, "alice", "", 10)
		assert.NoError(t, err)
		assert.Empty(t, trees, "listed during init")
		_, err = inst.CreateSession(ctx, core.NewSession{ID: "t", Principal: "alice"})
		return err
	})
	require.NoError(t, err)
	info, err := h.Owner(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, "alice", info.Principal)
	_, err = h.Owner(ctx, "nosuch")
	assert.ErrorIs(t, err, api.ErrTreeNotFound)
}

// A create whose init fails, or whose boot fails, leaves nothing behind:
// no row (the id can be created again), no file.
func TestFailedCreateLeavesNoTree(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	_, err := h.Create(ctx, "t", "alice", func(*core.Instance) error { return errors.New("init failed") })
	require.ErrorContains(t, err, "init failed")
	assert.False(t, exists(e.treePath("t")), "its file is removed")

	// A boot that cannot open the file: a directory stands in its place.
	e.setGate(func(id string) {
		if id == "u" {
			assert.NoError(t, os.Mkdir(e.treePath("u"), 0o700))
		}
	})
	_, err = h.Create(ctx, "u", "alice", nil)
	require.Error(t, err)
	e.setGate(nil)
	assert.False(t, exists(e.treePath("u")), "the boot's leftovers are removed")

	for _, id := range []string{"t", "u"} {
		_, err = h.Owner(ctx, id)
		assert.ErrorIs(t, err, api.ErrTreeNotFound, id)
		e.tree(h, id) // the id is free again
	}
	trees, _, err := h.List(ctx, "alice", "", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"t", "u"}, slices.Sorted(slices.Values(rootIDs(trees))))
}

// Files under an id with no index row are what a delete cut short left
// behind: a create of that id removes them before it boots, and gets a
// fresh tree rather than failing on them or inheriting them.
func TestCreateRemovesFilesLeftUnderItsID(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	require.NoError(t, os.MkdirAll(filepath.Dir(e.treePath("t")), 0o700))
	require.NoError(t, os.WriteFile(e.treePath("t"), []byte("left by a delete cut short"), 0o600))
	inst := e.tree(h, "t")
	_, err := inst.Session(ctx, "t")
	require.NoError(t, err)
}

// A create goes to its end once begun, whatever becomes of its caller
// (the client of POST /v1/sessions hanging up): a context already done
// still makes the tree.
func TestCreateFinishesForACallerGone(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	gone, cancel := context.WithCancel(ctx)
	cancel()
	inst, err := h.Create(gone, "t", "alice", func(inst *core.Instance) error {
		_, err := inst.CreateSession(ctx, core.NewSession{ID: "t", Principal: "alice"})
		return err
	})
	require.NoError(t, err)
	_, err = inst.Session(ctx, "t")
	require.NoError(t, err)
	_, err = h.Owner(ctx, "t")
	require.NoError(t, err)
}

// A Get that finds the tree open and then loses it to an eviction before
// it can hold it looks again and boots it: it never hands out an instance
// that has been closed.
func TestGetOfATreeEvictedUnderItBootsIt(t *testing.T) {
	e := newEnv(t)
	var h *host.Host
	var once sync.Once
	h = e.open(host.WithFoundHook(e.config(), func(id string) {
		once.Do(func() {
			e.clock.Advance(time.Minute)
			assert.Equal(t, 1, h.EvictIdle(ctx), "evicted before the Get holds it")
		})
	}))
	first := e.tree(h, "t")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inst, _, err := h.Get(rctx, "t")
	require.NoError(t, err)
	assert.NotSame(t, first, inst, "booted again")
	_, err = inst.Session(ctx, "t")
	require.NoError(t, err, "the instance handed out is open")
	assert.Equal(t, []string{"t", "t"}, e.bootedIDs())
}

// An index written by the first schema (no ready column) is migrated at
// Open: its trees stay listed and new trees can be made.
func TestIndexFromTheFirstSchemaIsMigrated(t *testing.T) {
	e := newEnv(t)
	e.execIndex( // version 1, as it was written
		`CREATE TABLE trees (id TEXT PRIMARY KEY, principal TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID`,
		`CREATE INDEX trees_by_principal ON trees (principal, created_at DESC, id)`,
		`CREATE TABLE wakeups (tree_id TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID`,
		`INSERT INTO trees (id, principal, created_at) VALUES ('old', 'alice', 1)`,
		`PRAGMA user_version = 1`,
	)

	h := e.open(e.config())
	e.tree(h, "new")
	trees, _, err := h.List(ctx, "alice", "", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"new", "old"}, slices.Sorted(slices.Values(rootIDs(trees))))
}

func setIndexVersion(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Tx(ctx, func(tx storage.Tx) error {
		_, err := tx.Exec(`PRAGMA user_version = ` + strconv.Itoa(v))
		return err
	}))
	require.NoError(t, db.Close())
}
