package api_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// unreadableDB refuses every transaction with the error it is given, and
// runs them otherwise.
type unreadableDB struct {
	storage.DB
	refuse *atomic.Pointer[error]
}

func (d unreadableDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	if err := d.refuse.Load(); err != nil {
		return *err
	}
	return d.DB.Tx(ctx, fn)
}

// A guest's (and a Durable Object's) one tree that cannot be read, its
// storage full or failing, is not "no such session": OneTree's Owner and
// Get return the read's error, a 503 that a retry resolves, never
// ErrTreeNotFound. A request a delete overtook asks Get whether the tree
// is gone (deletedUnder), and must not take a failed read for a delete.
func TestOneTreeThatCannotBeReadIsNotNotFound(t *testing.T) {
	ctx := context.Background()
	var refuse atomic.Pointer[error]
	tr := treetest.New(t)
	tr.WrapDB = func(db storage.DB) storage.DB { return unreadableDB{DB: db, refuse: &refuse} }
	node := tr.Boot(treetest.NewDriver(4))
	one := api.OneTree{ID: "tree1", Instance: func() *core.Instance { return node.Inst }}
	_, err := one.Create(ctx, "tree1", "alice", func(inst *core.Instance) error {
		_, err := inst.CreateSession(ctx, core.NewSession{ID: "tree1", Principal: "alice"})
		return err
	})
	require.NoError(t, err)

	for name, failure := range map[string]error{
		"disk full":      &storage.Error{Code: storage.CodeFull, Msg: "database or disk is full"},
		"storage closed": storage.ErrClosed,
	} {
		refuse.Store(&failure)
		_, err := one.Owner(ctx, "tree1")
		require.Error(t, err, name)
		assert.NotErrorIs(t, err, api.ErrTreeNotFound, name)
		assert.Equal(t, api.ErrUnavailable, api.ErrorOf(err).Type, name)
		_, _, err = one.Get(ctx, "tree1")
		assert.NotErrorIs(t, err, api.ErrTreeNotFound, name)
		assert.Equal(t, api.ErrUnavailable, api.ErrorOf(err).Type, name)
	}
	refuse.Store(nil)
	info, err := one.Owner(ctx, "tree1")
	require.NoError(t, err)
	assert.Equal(t, "alice", info.Principal, "read again, the tree is there")
}
