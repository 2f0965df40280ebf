package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/fakehost"
)

// The stream limit is per tree, and a released stream frees its place.
// (Through HTTP, a release waits on the server noticing the client left;
// docs_test's TestOpenAPIBodies drives the refusal end to end.)
func TestStreamLimitPerTree(t *testing.T) {
	h, err := NewTreeHandler(TreeDeps{Clock: fakehost.NewClock(0)}, NewConfig().WithStreamLimit(2))
	require.NoError(t, err)
	first, err := h.openStream("a")
	require.NoError(t, err)
	_, err = h.openStream("a")
	require.NoError(t, err)
	_, err = h.openStream("a")
	require.ErrorIs(t, err, ErrTooManyRequests, "a third stream on tree a")
	_, err = h.openStream("b")
	require.NoError(t, err, "tree b has its own limit")

	first()
	_, err = h.openStream("a")
	assert.NoError(t, err, "a released stream frees its place")
	_, err = h.openStream("a")
	assert.ErrorIs(t, err, ErrTooManyRequests)

	_, err = NewTreeHandler(TreeDeps{Clock: fakehost.NewClock(0)}, NewConfig().WithStreamLimit(0))
	assert.Error(t, err, "a limit under 1 is refused")
}
