package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg"
)

// Only a request whose tree's instance stopped under it asks the host for
// the tree's next instance (which boots the tree) to tell a delete from a
// restart: another 503 (storage busy, a host at its cap) is answered as it
// is, without booting anything.
func TestOnlyAStoppedInstanceAsksWhetherTheTreeWasDeleted(t *testing.T) {
	asked := 0
	tree := &Tree{RootID: "t", Next: func(context.Context) (*core.Instance, error) {
		asked++
		return nil, fail(ErrNotFound, "no such session")
	}}
	r, err := httpmsg.NewRequest(context.Background(), "GET", "/v1/sessions/t", nil)
	require.NoError(t, err)

	busy := &Error{Type: ErrUnavailable, Message: "the storage is busy; try again"}
	assert.Same(t, busy, deletedUnder(r, tree, busy))
	assert.Zero(t, asked, "a busy 503 booted the tree to ask")

	stopped := deletedUnder(r, tree, fmt.Errorf("admit: %w", core.ErrClosed))
	assert.Equal(t, ErrNotFound, ErrorOf(stopped).Type, "a request a delete overtook")
	assert.Equal(t, 1, asked)
}
