package api_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/treetest"
)

// OneTree answers for its one tree only: created once, owned by the root
// session's principal, listed to that principal alone, gone once the host
// says it deleted it; the directory's id source names that tree.
func TestOneTree(t *testing.T) {
	ctx := context.Background()
	node := treetest.New(t).Boot(treetest.NewDriver(4))
	deleted, created := false, ""
	one := api.OneTree{ID: "tree1", Instance: func() *core.Instance { return node.Inst },
		Deleted: func() bool { return deleted }, Created: func(id string) { created = id }}
	assert.Equal(t, "tree1", one.NewID())

	_, err := one.Owner(ctx, "tree1")
	require.ErrorIs(t, err, api.ErrTreeNotFound, "no root session yet")
	list, _, err := one.List(ctx, "alice", "", 10)
	require.NoError(t, err)
	assert.Empty(t, list)

	_, err = one.Create(ctx, "other", "alice", nil)
	require.ErrorIs(t, err, api.ErrTreeExists, "this host serves tree1 only")
	inst, err := one.Create(ctx, "tree1", "alice", func(inst *core.Instance) error {
		_, err := inst.CreateSession(ctx, core.NewSession{ID: "tree1", Principal: "alice"})
		return err
	})
	require.NoError(t, err)
	assert.Same(t, node.Inst, inst)
	assert.Equal(t, "tree1", created)
	_, err = one.Create(ctx, "tree1", "alice", nil)
	require.ErrorIs(t, err, api.ErrTreeExists, "created once")

	info, err := one.Owner(ctx, "tree1")
	require.NoError(t, err)
	assert.Equal(t, "alice", info.Principal)
	root, err := node.Inst.Session(ctx, "tree1")
	require.NoError(t, err)
	assert.Equal(t, root.CreatedAt, info.CreatedAt, "the list says what the root's snapshot says")
	assert.NotZero(t, info.CreatedAt)
	got, _, err := one.Get(ctx, "tree1")
	require.NoError(t, err)
	assert.Same(t, node.Inst, got)
	list, next, err := one.List(ctx, "alice", "", 10)
	require.NoError(t, err)
	assert.Equal(t, []api.TreeInfo{info}, list)
	assert.Empty(t, next)
	list, _, err = one.List(ctx, "alice", "anything", 10)
	require.NoError(t, err)
	assert.Empty(t, list, "the one tree is on the first page only")
	list, _, err = one.List(ctx, "bob", "", 10)
	require.NoError(t, err)
	assert.Empty(t, list, "another principal's tree is not listed")

	deleted = true
	_, err = one.Owner(ctx, "tree1")
	require.ErrorIs(t, err, api.ErrTreeNotFound, "a deleted tree is gone")
}
