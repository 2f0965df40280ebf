package host_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/faultvfs"
)

// A keyed create whose last write, the one that makes its tree ready,
// fails is undone like any failed create: the tree made nothing visible,
// so its key is free and a retry with it creates the tree, at once (not
// 503 until the next start).
func TestCreateKeyedWhoseReadyWriteFailsFreesTheKey(t *testing.T) {
	e := newEnv(t)
	vfs := "host-ready-fails"
	fault := e.faultVFS(t, vfs)
	h := e.open(host.WithVFS(e.config(), vfs))
	key := api.CreateKey{Key: "k", Digest: "d"}

	_, err := h.CreateKeyed(ctx, "t1", "alice", key, func(inst *core.Instance) error {
		if err := rootSession("t1", "alice")(inst); err != nil {
			return err
		}
		fault.FailNext(1, faultvfs.Full) // the index's write that makes t1 ready
		return nil
	})
	require.Error(t, err)
	require.Equal(t, 1, fault.Failed())
	_, err = h.Owner(ctx, "t1")
	require.ErrorIs(t, err, api.ErrTreeNotFound)

	id, err := h.CreateKeyed(ctx, "t1", "alice", key, rootSession("t1", "alice"))
	require.NoError(t, err, "the failed create freed its key and its id")
	assert.Equal(t, "t1", id)
	assert.Equal(t, []string{"t1"}, listIDs(t, h, "alice"))
}

// A same-key create that reads the key while a create undoes a tree
// whose ready commit was reported failed but stored (the row reads
// ready) waits for the undo: it was answered the id of the tree then
// deleted, and once the undo freed the key a third create made a second
// tree for the key.
func TestCreateKeyedDuringTheUndoOfALateFailedReadyWaits(t *testing.T) {
	e := newEnv(t)
	fault := e.faultVFS(t, "host-ready-undo")
	key := api.CreateKey{Key: "k", Digest: "d"}
	var h *host.Host
	var armed atomic.Bool
	var second string
	var secondErr error
	waits := make(chan string, 1)
	done := make(chan struct{})
	cfg := host.WithClosingHook(host.WithVFS(e.config(), "host-ready-undo"), func(id string) {
		if id != "t1" || !armed.CompareAndSwap(true, false) {
			return
		}
		// t1's undo is under way (its ready row not dropped yet): another
		// request with the key reads it now.
		go func() {
			defer close(done)
			second, secondErr = h.CreateKeyed(ctx, "t2", "alice", key, rootSession("t2", "alice"))
		}()
		select {
		case <-waits: // it waits for the undo (the fix)
		case <-done: // it answered without waiting
		}
	})
	h = e.open(host.WithCreateWaitsHook(cfg, func(id string) { waits <- id }))

	_, err := h.CreateKeyed(ctx, "t1", "alice", key, func(inst *core.Instance) error {
		if err := rootSession("t1", "alice")(inst); err != nil {
			return err
		}
		fault.FailLateCommits(1, faultvfs.IOErrFsync) // the next commit: the row made ready
		armed.Store(true)
		return nil
	})
	require.Error(t, err)
	require.Equal(t, 1, fault.LateCommits())
	<-done
	require.NoError(t, secondErr)
	assert.Equal(t, "t2", second, "the key's create after the undo made the tree")
	_, err = h.Owner(ctx, second)
	require.NoError(t, err, "the id the second create was answered exists")

	third, err := h.CreateKeyed(ctx, "t3", "alice", key, rootSession("t3", "alice"))
	require.NoError(t, err)
	assert.Equal(t, second, third, "one tree for one key")
	assert.Equal(t, []string{"t2"}, listIDs(t, h, "alice"))
}
