package host_test

import (
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
