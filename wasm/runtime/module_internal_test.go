package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/abi"
)

// Instructions of fakeGuest's code.
const (
	opDrop    = 0x1a
	opI64Load = 0x29
)

// fakeGuest is the least module Compile takes for a guest: the exports
// every guest has (answering idle), announcing ABI version, and "clock
// id", which reads WASI clock id (0 realtime, 1 monotonic) as the Go
// runtime does.
func fakeGuest(version uint32) []byte {
	idle := []byte{opI32Const, byte(abi.StatusIdle)}
	return assemble([]wasmImport{{module: "wasi_snapshot_preview1", name: "clock_time_get", params: []byte{wasmI32, wasmI64, wasmI32}, results: []byte{wasmI32}}}, []wasmFunc{
		{abi.ExportVersion, nil, []byte{wasmI32}, appendSleb32([]byte{opI32Const}, int32(version))},
		{abi.ExportAlloc, []byte{wasmI32}, []byte{wasmI32}, []byte{opI32Const, 0}},
		{abi.ExportBoot, []byte{wasmI32, wasmI32}, []byte{wasmI32}, idle},
		{abi.ExportRequest, []byte{wasmI64, wasmI32, wasmI32}, []byte{wasmI32}, idle},
		{abi.ExportPump, nil, []byte{wasmI32}, idle},
		{"_initialize", nil, nil, nil},
		// clock_time_get(id, precision 1, result at 0); drop the errno; load the result
		{"clock", []byte{wasmI32}, []byte{wasmI64}, []byte{opLocalGet, 0, opI64Const, 1, opI32Const, 0, opCall, 0, opDrop, opI32Const, 0, opI64Load, 3, 0}},
	})
}

// fixedClock is nopServices at a fixed time of day with milliseconds.
type fixedClock struct{ nopServices }

const fixedNow = 1_700_000_000_123 // ms

func (fixedClock) Now() int64 { return fixedNow }

// Every clock the guest's Go runtime reads is the Services' (Services.Now,
// in ms): the wall clock to the millisecond, and the monotonic clock from
// it, a nanosecond further at each read so it never stands still.
func TestGuestClocksAreTheServicesClock(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, fakeGuest(abi.PackVersion(abi.Major, abi.Minor)), CompileOptions{})
	require.NoError(t, err)
	defer m.Close(ctx)
	g, err := m.Instantiate(ctx, Options{Conn: cannedConn{}, Services: fixedClock{}})
	require.NoError(t, err)
	defer g.Close(ctx)
	clock := func(id uint64) int64 {
		res, err := g.mod.ExportedFunction("clock").Call(ctx, id)
		require.NoError(t, err)
		return int64(res[0])
	}
	assert.Equal(t, int64(fixedNow)*1e6, clock(0), "the wall clock")
	assert.Equal(t, int64(fixedNow)*1e6, clock(0), "the wall clock stands with the Services'")
	mono := clock(1)
	assert.GreaterOrEqual(t, mono, int64(fixedNow)*1e6)
	assert.Equal(t, mono+1, clock(1), "the monotonic clock moves on by a nanosecond")
}

// A guest of another major version is refused as it is instantiated,
// and its memory is given back.
func TestInstantiateRefusesAnotherMajorVersion(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, fakeGuest(abi.PackVersion(abi.Major+1, 0)), CompileOptions{})
	require.NoError(t, err)
	defer m.Close(ctx)
	_, err = m.Instantiate(ctx, Options{Conn: cannedConn{}, Services: nopServices{}})
	require.ErrorIs(t, err, ErrVersion)
	require.Zero(t, m.reserved.Load(), "the refused guest's memory was unmapped")

	m2, err := Compile(ctx, fakeGuest(abi.PackVersion(abi.Major, 0)), CompileOptions{})
	require.NoError(t, err)
	defer m2.Close(ctx)
	g, err := m2.Instantiate(ctx, Options{Conn: cannedConn{}, Services: nopServices{}})
	require.NoError(t, err, "an older minor version is the same ABI")
	require.Zero(t, g.guestMinor)
}
