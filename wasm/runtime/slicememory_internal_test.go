package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// wazero's default memory, used where the mapping is refused, keeps the
// guest's bytes when memory.grow reallocates it.
func TestSliceMemoryGrowKeepsTheBytes(t *testing.T) {
	var m sliceMemory
	buf := m.Reallocate(1 << 16)
	require.Len(t, buf, 1<<16)
	buf[0], buf[1<<16-1] = 1, 2
	buf = m.Reallocate(8 << 16)
	require.Len(t, buf, 8<<16)
	require.Equal(t, byte(1), buf[0])
	require.Equal(t, byte(2), buf[1<<16-1])
	require.Zero(t, buf[1<<16], "grown memory starts zeroed")
}
