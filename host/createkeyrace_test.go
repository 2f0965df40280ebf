package host_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/host"
)

// A keyed create of an id that names a tree already is refused (409)
// and records nothing under its key: its retry, with the same body and
// so the same id, is refused again, never answered that tree as the one
// its key created (the tree is another principal's here). The tree is not
// open, so only the index's commit finds the id taken.
func TestCreateKeyedOfATakenIDLeavesTheKeyFree(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	_, err := h.Create(ctx, "t1", "bob", rootSession("t1", "bob"))
	require.NoError(t, err)
	require.NoError(t, h.Close(ctx))
	h = e.open(e.config())
	require.Nil(t, h.OpenInstance("t1"))

	key := api.CreateKey{Key: "k", Digest: "d"}
	for range 2 {
		id, err := h.CreateKeyed(ctx, "t1", "alice", key, rootSession("t1", "alice"))
		require.ErrorIs(t, err, api.ErrTreeExists, "answered tree %q", id)
	}
	id, err := h.CreateKeyed(ctx, "t2", "alice", key, rootSession("t2", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t2", id, "the key was free")
	assert.Equal(t, []string{"t2"}, listIDs(t, h, "alice"))
}

// Two creates with one key that both read it before either wrote it make
// one tree: the one that writes second finds the key taken in its own
// commit, writes nothing, and is answered the first one's tree. Here the
// first create (of t1) read the key, then waited for t1's id, which a
// delete held; meanwhile the second (of t2) read the key and created t2.
func TestCreateKeyedRacingCreatesMakeOneTree(t *testing.T) {
	e := newEnv(t)
	closing, releaseClose := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg := host.WithClosingHook(e.config(), func(id string) {
		if id == "t1" {
			once.Do(func() { close(closing); <-releaseClose })
		}
	})
	waiting := make(chan string, 1)
	h := e.open(host.WithCreateWaitsHook(cfg, func(id string) { waiting <- id }))
	_, err := h.Create(ctx, "t1", "alice", rootSession("t1", "alice"))
	require.NoError(t, err)

	deleted := make(chan error, 1)
	go func() { deleted <- h.Delete(ctx, "t1") }()
	<-closing

	key := api.CreateKey{Key: "k", Digest: "d"}
	type answer struct {
		id  string
		err error
	}
	first := make(chan answer, 1)
	go func() {
		id, err := h.CreateKeyed(ctx, "t1", "alice", key, rootSession("t1", "alice"))
		first <- answer{id, err}
	}()
	require.Equal(t, "t1", <-waiting, "the first create read the key and waits for the id")

	id, err := h.CreateKeyed(ctx, "t2", "alice", key, rootSession("t2", "alice"))
	require.NoError(t, err)
	assert.Equal(t, "t2", id)

	close(releaseClose)
	require.NoError(t, <-deleted)
	a := <-first
	require.NoError(t, a.err)
	assert.Equal(t, "t2", a.id, "the create that wrote second is answered the first one's tree")
	assert.Equal(t, []string{"t2"}, listIDs(t, h, "alice"), "one tree for one key")
}
