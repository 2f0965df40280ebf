package host_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/host"
)

// A Create of an id that another operation holds but that names no tree
// (here a Delete of it, which answers not found) waits for that operation
// and then creates the tree: only a tree that exists is "already exists".
// It was answered api.ErrTreeExists at once, for a tree that did not exist
// and never came to (an embedder choosing its own ids met it whenever a
// Delete or a Get of the id ran at the time).
func TestCreateWaitsOutADeleteOfNothing(t *testing.T) {
	e := newEnv(t)
	deleting, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseDelete := func() { releaseOnce.Do(func() { close(release) }) }
	cfg := host.WithDeleteFault(e.config(), func(string) error {
		close(deleting)
		<-release
		return nil
	})
	// The delete goes on once the create waits for it (or once the test
	// ends: a create that did not wait must fail the test, not hang it).
	cfg = host.WithCreateWaitsHook(cfg, func(string) { releaseDelete() })
	h := e.open(cfg)
	t.Cleanup(releaseDelete) // after the host's Close in cleanup order: runs first

	deleted := make(chan error, 1)
	go func() { deleted <- h.Delete(ctx, "t") }()
	<-deleting
	_, err := h.Create(ctx, "t", "alice", nil)
	require.NoError(t, err, "the id names no tree: the create is not refused as existing")
	assert.ErrorIs(t, <-deleted, api.ErrTreeNotFound)
	info, err := h.Owner(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, "alice", info.Principal)

	// A tree that exists is still refused, at once.
	_, err = h.Create(ctx, "t", "bob", nil)
	assert.True(t, errors.Is(err, api.ErrTreeExists), "%v", err)
}
