package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/fakehost"
)

// closed reports whether c is closed, without waiting.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// The stream limit is per tree: one stream more ends the tree's oldest,
// and a released stream frees its place.
func TestStreamLimitEndsTheOldest(t *testing.T) {
	h, err := NewTreeHandler(TreeDeps{Clock: fakehost.NewClock(0)}, NewConfig().WithStreamLimit(2))
	require.NoError(t, err)
	first, _ := h.openStream("a")
	second, releaseSecond := h.openStream("a")
	other, _ := h.openStream("b")
	assert.False(t, closed(first) || closed(second) || closed(other), "within the limit")

	third, _ := h.openStream("a")
	assert.True(t, closed(first), "a third stream on tree a ends its oldest")
	assert.False(t, closed(second) || closed(third) || closed(other), "the others stay, tree b's too")

	releaseSecond()
	fourth, _ := h.openStream("a")
	assert.False(t, closed(third) || closed(fourth), "a released stream freed its place")
	fifth, _ := h.openStream("a")
	assert.True(t, closed(third), "then the oldest open one ends")
	assert.False(t, closed(fourth) || closed(fifth))

	_, err = NewTreeHandler(TreeDeps{Clock: fakehost.NewClock(0)}, NewConfig().WithStreamLimit(0))
	assert.Error(t, err, "a limit under 1 is refused")
}
