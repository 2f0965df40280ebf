//go:build linux

package runtime

import (
	"context"
	goruntime "runtime"
	"sync/atomic"
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

// closerConn is a cannedConn whose Begin runs onBegin: a Close arriving
// while the guest is inside a call, at an import.
type closerConn struct {
	cannedConn
	onBegin func()
}

func (c closerConn) Begin() error {
	c.onBegin()
	return nil
}

// A Close that comes while a call holds the guest cannot unmap its memory
// then (the guest may still run in it); the call unmaps it as it returns,
// whether the guest was still running (the call fails) or had already
// returned to it (the call succeeds).
func TestCloseDuringCallReleasesMemory(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, guestbuild.Must(t), CompileOptions{CacheDir: guestbuild.CacheDir()})
	require.NoError(t, err)
	defer m.Close(ctx)

	t.Run("inside the guest", func(t *testing.T) {
		var g *Guest
		g, err := m.Instantiate(ctx, Options{Conn: closerConn{onBegin: func() { require.NoError(t, g.Close(ctx)) }}, Services: nopServices{}})
		require.NoError(t, err)
		require.EqualValues(t, 1, m.reserved.Load())
		require.ErrorIs(t, g.Boot(ctx, BootConfig{TreeID: "t"}), ErrGuestClosed)
		require.Zero(t, m.reserved.Load(), "the failed call unmapped the memory")
	})

	t.Run("after the guest returned", func(t *testing.T) {
		g, err := m.Instantiate(ctx, Options{Conn: cannedConn{}, Services: nopServices{}})
		require.NoError(t, err)
		g.mu.Lock() // a call whose export has returned, not yet its method
		require.NoError(t, g.Close(ctx))
		require.EqualValues(t, 1, m.reserved.Load(), "kept while the call holds the guest")
		g.unlock() // the call's method returns
		require.Zero(t, m.reserved.Load(), "the returning call unmapped the memory")
		require.True(t, g.Closed())
		require.ErrorIs(t, g.Wake(ctx), ErrGuestClosed)
	})
}

// Module.Close closes its open guests and unmaps their memory, keeping
// only that of a guest whose call still runs until that call returns.
func TestModuleCloseReleasesGuestMemory(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, guestbuild.Must(t), CompileOptions{CacheDir: guestbuild.CacheDir()})
	require.NoError(t, err)
	idle, err := m.Instantiate(ctx, Options{Conn: cannedConn{}, Services: nopServices{}})
	require.NoError(t, err)
	busy, err := m.Instantiate(ctx, Options{Conn: cannedConn{}, Services: nopServices{}})
	require.NoError(t, err)
	require.EqualValues(t, 2, m.reserved.Load())

	busy.mu.Lock() // a call runs in busy
	require.NoError(t, m.Close(ctx))
	require.EqualValues(t, 1, m.reserved.Load(), "the idle guest's memory is unmapped, the busy one's kept")
	busy.unlock()
	require.Zero(t, m.reserved.Load(), "the busy guest's call unmapped it as it returned")
	require.True(t, idle.Closed())
	require.True(t, busy.Closed())
	require.ErrorIs(t, idle.Wake(ctx), ErrGuestClosed)
}

// A reservedMemory grows up to the module's maximum, its last byte
// included, and no further (memory.grow fails past it).
func TestReservedMemoryGrowsToItsMaximum(t *testing.T) {
	var live atomic.Int64
	alloc, mem := newMemoryAllocator(&live)
	const max = 4 << 16
	lm := alloc.Allocate(1<<16, max)
	require.EqualValues(t, 1, live.Load())
	buf := lm.Reallocate(max)
	require.Len(t, buf, max)
	buf[max-1] = 7
	require.Nil(t, lm.Reallocate(max+1))
	require.Equal(t, byte(7), lm.Reallocate(2 << 16)[:max][max-1], "growing and shrinking keeps the mapping")
	mem.release()
	require.Zero(t, live.Load())
}
