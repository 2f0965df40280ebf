package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/revenantrt/revenant/internal/guestbuild"
)

// memoryAfterData instantiates wasm without running any start function
// and returns its memory: what its data segments wrote.
func memoryAfterData(t *testing.T, wasm []byte, imports bool) []byte {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	if imports {
		wasi_snapshot_preview1.MustInstantiate(ctx, r)
		require.NoError(t, instantiateImports(ctx, r))
	}
	mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions())
	require.NoError(t, err)
	mem, ok := mod.Memory().Read(0, mod.Memory().Size())
	require.True(t, ok)
	return bytes.Clone(mem)
}

func dataSegments(t *testing.T, wasm []byte) uint64 {
	t.Helper()
	for off := 8; off < len(wasm); {
		n, k := binary.Uvarint(wasm[off+1:])
		if wasm[off] == sectionData {
			c, _ := binary.Uvarint(wasm[off+1+k:])
			return c
		}
		off += 1 + k + int(n)
	}
	return 0
}

// The guest as built: one segment instead of tens of thousands, and the
// very same memory before its first instruction runs.
func TestCoalesceDataGuest(t *testing.T) {
	wasm := guestbuild.Must(t)
	out := coalesceData(wasm)
	require.Greater(t, dataSegments(t, wasm), uint64(1000))
	require.Equal(t, uint64(1), dataSegments(t, out))
	want := memoryAfterData(t, wasm, true)
	got := memoryAfterData(t, out, true)
	require.Equal(t, len(want), len(got))
	require.True(t, bytes.Equal(want, got), "coalesced data writes different memory")
}

// module is a module of one memory page and the given data section
// contents (nil: none), after an optional data count section.
func module(dataCount bool, data []byte) []byte {
	b := []byte{0, 'a', 's', 'm', 1, 0, 0, 0, 5, 3, 1, 0, 1}
	if dataCount {
		b = append(b, sectionDataCount, 1, 1)
	}
	if data != nil {
		b = append(b, sectionData)
		b = binary.AppendUvarint(b, uint64(len(data)))
		b = append(b, data...)
	}
	return b
}

type seg struct {
	at   int32
	data string
}

func segments(ss ...seg) []byte {
	b := binary.AppendUvarint(nil, uint64(len(ss)))
	for _, s := range ss {
		b = append(b, 0, opI32Const)
		b = appendSleb32(b, s.at)
		b = append(b, opEnd)
		b = binary.AppendUvarint(b, uint64(len(s.data)))
		b = append(b, s.data...)
	}
	return b
}

// oneByteShort is wasm without its last byte: its last section claims one
// byte more than the file holds.
func oneByteShort(wasm []byte) []byte { return wasm[:len(wasm)-1] }

func TestCoalesceData(t *testing.T) {
	for _, wasm := range [][]byte{
		module(false, segments(seg{3, "ab"}, seg{5, "c"}, seg{200, "xyz"}, seg{8000, "end"})),
		module(false, segments(seg{200, "xyz"}, seg{3, "ab"}, seg{8000, "end"}, seg{5, "c"})),
	} {
		out := coalesceData(wasm)
		require.Equal(t, uint64(1), dataSegments(t, out))
		require.Equal(t, memoryAfterData(t, wasm, false), memoryAfterData(t, out, false))
	}

	// Left as they are: what one segment could not say the same way, or
	// nothing to gain.
	for name, wasm := range map[string][]byte{
		"overlapping":            module(false, segments(seg{3, "abc"}, seg{4, "x"})),
		"overlapping, unordered": module(false, segments(seg{4, "x"}, seg{3, "abc"})),
		"one segment":            module(false, segments(seg{3, "abc"})),
		"data count":             module(true, segments(seg{1, "a"}, seg{3, "b"})),
		"no data":                module(false, nil),
		"passive":                module(false, []byte{2, 0, opI32Const, 1, opEnd, 1, 'a', 1, 1, 'p'}),
		"truncated":              module(false, segments(seg{1, "a"}, seg{3, "b"}))[:20],
		"not wasm":               []byte("text"),
		"trailing bytes":         module(false, append(segments(seg{1, "a"}, seg{3, "b"}), 0)),
		"one byte short":         oneByteShort(module(false, segments(seg{1, "a"}, seg{3, "b"}))),
	} {
		require.Equal(t, wasm, coalesceData(wasm), name)
	}
	// A span past the bound is left too (compared by hand: a failure must
	// not print the 64 MiB image).
	wide := module(false, segments(seg{0, "a"}, seg{maxCoalescedSpan, "b"}))
	require.True(t, bytes.Equal(wide, coalesceData(wide)), "a span past maxCoalescedSpan was coalesced")
}

func TestSleb32(t *testing.T) {
	for _, v := range []int32{0, 1, 63, 64, -1, -64, -65, 1 << 20, -1 << 31, 1<<31 - 1} {
		b := appendSleb32(nil, v)
		got, n := sleb(b)
		require.Equal(t, len(b), n, "%d", v)
		require.Equal(t, int64(v), got)
	}
}
