package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A page that holds the principal's last tree has no next cursor, also
// when it is exactly full: a cursor that leads only to an empty page costs
// every client that pages to the end one more request (on Cloudflare, one
// more read of the index) and shows "more" where there is none.
func TestListPageExactlyFullWithTheLastTreeHasNoCursor(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	for _, id := range []string{"a", "b", "c"} {
		e.tree(h, id)
	}
	page, next, err := h.List(ctx, "alice", "", 3)
	require.NoError(t, err)
	assert.Len(t, page, 3)
	assert.Empty(t, next, "no tree is left for a next page")

	page, next, err = h.List(ctx, "alice", "", 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.NotEmpty(t, next, "one tree is left")
	page, next, err = h.List(ctx, "alice", next, 1)
	require.NoError(t, err)
	assert.Len(t, page, 1)
	assert.Empty(t, next, "the last page, exactly full")
}
