//go:build linux

package runtime

import (
	"context"
	goruntime "runtime"
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
	// Lengths and nil checks only: a failure message must not print 4 GiB.
	require.Equal(t, uint64(1)<<32, uint64(len(g.mem.buf)), "the guest (its _initialize ran) is in a reservedMemory at the module's maximum")
	require.NoError(t, g.Close(ctx))
	require.True(t, g.mem.buf == nil, "Close unmapped it")
	// Until here g is in use: its cleanup, the backstop, must not unmap first.
	goruntime.KeepAlive(g)
}
