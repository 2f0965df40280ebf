package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/sqlitedb"
)

// A delete whose index write fails and whose read-back fails too (a rival
// connection holds the index's write lock past its busy wait) knows
// nothing of whether it is stored: the tree is taken as still there, the
// error answered (503) and its files kept. A read-back that failed taken
// as "no row" would remove the files of a tree still listed.
func TestDeleteWhoseIndexWriteAndReadBackFailKeepsTheTree(t *testing.T) {
	e := newEnv(t)
	held, release := make(chan struct{}), make(chan struct{})
	released := false
	stop := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(stop)
	rivalDone := make(chan error, 1)
	cfg := host.WithDeleteFault(e.config(), func(string) error {
		go func() {
			db, err := sqlitedb.Open(filepath.Join(e.dir, "index.db"), sqlitedb.Options{})
			if err != nil {
				close(held)
				rivalDone <- err
				return
			}
			rivalDone <- db.Tx(context.Background(), func(storage.Tx) error {
				close(held)
				<-release
				return nil
			})
			db.Close()
		}()
		<-held
		return errors.New("disk I/O error")
	})
	h := e.open(cfg)
	e.tree(h, "t")

	err := h.Delete(ctx, "t") // the read-back waits out the busy timeout
	stop()
	require.NoError(t, <-rivalDone)
	require.Error(t, err, "a read-back that failed was taken as the delete stored")
	assert.True(t, exists(e.treePath("t")), "the tree's files are kept")
	_, err = h.Owner(ctx, "t")
	require.NoError(t, err, "the tree is still listed")
}
