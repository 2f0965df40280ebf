//go:build linux

package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
)

// A guest's memory is one reserved mapping, unmapped by Close once no call
// runs.
func TestReservedMemory(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, guestbuild.Must(t), CompileOptions{CacheDir: guestbuild.CacheDir()})
	require.NoError(t, err)
	defer m.Close(ctx)
	g, err := m.Instantiate(ctx, Options{Conn: cannedConn{}, Services: nopServices{}})
	require.NoError(t, err)
	require.NotNil(t, g.mem.buf, "the guest (its _initialize ran) is in a reservedMemory")
	require.Equal(t, uint64(len(g.mem.buf)), uint64(1)<<32, "reserved at the module's maximum")
	require.NoError(t, g.Close(ctx))
	require.Nil(t, g.mem.buf, "Close unmapped it")
}
