package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/revenantrt/revenant/wasm/abi"
)

// Value types and instructions of the hand-assembled modules below
// (WebAssembly core spec, 5.3 and 5.4).
const (
	wasmI32       = 0x7f
	wasmI64       = 0x7e
	opLocalGet    = 0x20
	opCall        = 0x10
	opI64Const    = 0x42
	memoryPages   = 1
	memoryPageLen = 1 << 16
)

// wasmImport is a function a hand-assembled module imports from the
// revenant import module.
type wasmImport struct {
	name            string
	params, results []byte
	module          string // "": abi.ImportModule
}

// wasmFunc is a function a hand-assembled module defines and exports;
// body is its code without the final end. Imports are functions 0…n-1.
type wasmFunc struct {
	name            string
	params, results []byte
	body            []byte
}

// assemble is a module with one page of memory, exported as "memory",
// importing imports from the revenant module and exporting funcs: a guest
// reduced to the calls a test makes, so a test reaches an import with the
// very arguments it means to check.
func assemble(imports []wasmImport, funcs []wasmFunc) []byte {
	vec := func(items ...[]byte) []byte {
		b := binary.AppendUvarint(nil, uint64(len(items)))
		for _, it := range items {
			b = append(b, it...)
		}
		return b
	}
	name := func(s string) []byte { return append(binary.AppendUvarint(nil, uint64(len(s))), s...) }
	funcType := func(params, results []byte) []byte {
		b := append([]byte{0x60}, binary.AppendUvarint(nil, uint64(len(params)))...)
		b = append(b, params...)
		b = binary.AppendUvarint(b, uint64(len(results)))
		return append(b, results...)
	}
	section := func(id byte, body []byte) []byte {
		return append(append([]byte{id}, binary.AppendUvarint(nil, uint64(len(body)))...), body...)
	}
	var types, imps, fns, exps, codes [][]byte
	for _, im := range imports {
		if im.module == "" {
			im.module = abi.ImportModule
		}
		imps = append(imps, append(append(append(name(im.module), name(im.name)...), 0x00), binary.AppendUvarint(nil, uint64(len(types)))...))
		types = append(types, funcType(im.params, im.results))
	}
	for i, f := range funcs {
		fns = append(fns, binary.AppendUvarint(nil, uint64(len(types))))
		types = append(types, funcType(f.params, f.results))
		exps = append(exps, append(append(name(f.name), 0x00), binary.AppendUvarint(nil, uint64(len(imports)+i))...))
		code := append([]byte{0}, f.body...) // no locals
		code = append(code, opEnd)
		codes = append(codes, append(binary.AppendUvarint(nil, uint64(len(code))), code...))
	}
	exps = append(exps, append(name("memory"), 0x02, 0))
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	m = append(m, section(1, vec(types...))...)
	m = append(m, section(2, vec(imps...))...)
	m = append(m, section(3, vec(fns...))...)
	m = append(m, section(5, vec([]byte{0x00, memoryPages}))...)
	m = append(m, section(7, vec(exps...))...)
	return append(m, section(10, vec(codes...))...)
}

// importCaller is a module whose export "call" passes its arguments to
// the import name, of type (params) -> (results), and returns its results.
func importCaller(name string, params, results []byte) []byte {
	var body []byte
	for i := range params {
		body = append(body, opLocalGet, byte(i))
	}
	body = append(body, opCall, 0)
	return assemble([]wasmImport{{name: name, params: params, results: results}}, []wasmFunc{{"call", params, results, body}})
}

// instantiateWasm instantiates wasm on a runtime with the revenant import
// module, for calls made for g.
func instantiateWasm(t *testing.T, wasm []byte) api.Module {
	t.Helper()
	ctx := t.Context()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	require.NoError(t, instantiateImports(ctx, r))
	mod, err := r.Instantiate(ctx, wasm)
	require.NoError(t, err)
	return mod
}

// callAs calls mod's export name as a call of g would: the imports find g
// in the context.
func callAs(ctx context.Context, g *Guest, mod api.Module, name string, args ...uint64) ([]uint64, error) {
	return mod.ExportedFunction(name).Call(context.WithValue(ctx, guestKey{}, g), args...)
}

// testGuest is a Guest over s with a discarded log, for import bodies.
func testGuest(s Services) *Guest {
	return &Guest{opts: Options{Conn: cannedConn{}, Services: s}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), fns: map[string]api.Function{}}
}

// randomOnly is a Services that records the lengths Random was asked to
// fill, with 0xAA bytes; nothing else is used.
type randomOnly struct {
	Services
	asked []int
}

func (s *randomOnly) Random(p []byte) {
	s.asked = append(s.asked, len(p))
	for i := range p {
		p[i] = 0xAA
	}
}

// The random import fills exactly the guest's range, up to the last byte
// of its memory; a range past the memory traps before the Services are
// asked for any bytes (the length is the guest's: up to 4 GiB).
func TestRandomFillsTheGuestsRangeAndRefusesOneOutside(t *testing.T) {
	mod := instantiateWasm(t, importCaller(abi.ImportRandom, []byte{wasmI32, wasmI32}, nil))
	s := &randomOnly{}
	g := testGuest(s)

	_, err := callAs(t.Context(), g, mod, "call", memoryPageLen-8, 8)
	require.NoError(t, err, "the memory's last 8 bytes are the guest's")
	tail, ok := mod.Memory().Read(memoryPageLen-9, 9)
	require.True(t, ok)
	assert.Equal(t, append([]byte{0}, bytes.Repeat([]byte{0xAA}, 8)...), tail)
	assert.Equal(t, []int{8}, s.asked)

	for _, r := range [][2]uint64{{memoryPageLen - 8, 9}, {memoryPageLen, 1}, {0, 16 << 20}, {1<<32 - 1, 2}} {
		mod := instantiateWasm(t, importCaller(abi.ImportRandom, []byte{wasmI32, wasmI32}, nil))
		_, err := callAs(t.Context(), g, mod, "call", r[0], r[1])
		require.ErrorContains(t, err, "random: out of range", "%d bytes at %#x", r[1], r[0])
	}
	assert.Equal(t, []int{8}, s.asked, "no bytes asked for a range outside the memory")
}

// levelRecorder is a slog.Handler keeping the level and message of each
// record.
type levelRecorder struct{ got []slog.Record }

func (h *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelRecorder) Handle(_ context.Context, r slog.Record) error {
	h.got = append(h.got, r)
	return nil
}
func (h *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levelRecorder) WithGroup(string) slog.Handler      { return h }

// The log import logs the guest's text at the guest's level (an
// slog.Level), so a host filtering by level sees the guest's warnings as
// warnings and its debug lines as debug.
func TestLogImportKeepsTheGuestsLevel(t *testing.T) {
	mod := instantiateWasm(t, importCaller(abi.ImportLog, []byte{wasmI32, wasmI32, wasmI32}, nil))
	h := &levelRecorder{}
	g := testGuest(nopServices{})
	g.log = slog.New(h)
	require.True(t, mod.Memory().Write(100, []byte("disk is slow")))
	for _, level := range []slog.Level{slog.LevelWarn, slog.LevelDebug, slog.LevelError} {
		_, err := callAs(t.Context(), g, mod, "call", api.EncodeI32(int32(level)), 100, 12)
		require.NoError(t, err)
	}
	require.Len(t, h.got, 3)
	for i, level := range []slog.Level{slog.LevelWarn, slog.LevelDebug, slog.LevelError} {
		assert.Equal(t, level, h.got[i].Level)
		assert.Equal(t, "disk is slow", h.got[i].Message)
	}
}

// A pointer argument outside the guest's memory is the guest's bug: the
// import traps rather than read nothing (an empty failure message, an
// empty statement).
func TestImportReadOutsideMemoryTraps(t *testing.T) {
	g := testGuest(nopServices{})
	for _, r := range [][2]uint64{{memoryPageLen - 4, 5}, {memoryPageLen, 1}, {1<<32 - 1, 1<<32 - 1}} {
		mod := instantiateWasm(t, importCaller(abi.ImportFail, []byte{wasmI32, wasmI32}, nil))
		_, err := callAs(t.Context(), g, mod, "call", r[0], r[1])
		require.ErrorContains(t, err, "out of range", "%d bytes at %#x", r[1], r[0])
	}
	mod := instantiateWasm(t, importCaller(abi.ImportFail, []byte{wasmI32, wasmI32}, nil))
	require.True(t, mod.Memory().Write(memoryPageLen-4, []byte("last")))
	_, err := callAs(t.Context(), g, mod, "call", memoryPageLen-4, 4)
	require.NoError(t, err)
	assert.Equal(t, "last", g.failMsg, "the fail import keeps the guest's message for the call's GuestError")
}

// timersOnly is a Services that records the timers cleared; nothing else
// is used.
type timersOnly struct {
	Services
	cleared []uint64
}

func (s *timersOnly) ClearTimer(id uint64) { s.cleared = append(s.cleared, id) }

// A call whose context is done (the caller cancelled it, or the watchdog
// fired) stops at the guest's next import, before the import does
// anything: wazero alone would let a guest without close-on-context-done
// run on.
func TestImportStopsACallWhoseContextIsDone(t *testing.T) {
	mod := instantiateWasm(t, importCaller(abi.ImportTimerClear, []byte{wasmI64}, nil))
	s := &timersOnly{}
	g := testGuest(s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := callAs(ctx, g, mod, "call", 7)
	var exit *sys.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, sys.ExitCodeContextCanceled, exit.ExitCode())
	assert.Empty(t, s.cleared, "the import did nothing")
	assert.True(t, mod.IsClosed())
}

// fencedEndGuest is a guest reduced to taking egress ends: revenant_alloc
// answers a fixed pointer, and revenant_egress_end reports each end's id
// through timer_clear, so the Services see the order the ends came in.
func fencedEndGuest() []byte {
	return assemble([]wasmImport{{name: abi.ImportTimerClear, params: []byte{wasmI64}}}, []wasmFunc{
		{abi.ExportAlloc, []byte{wasmI32}, []byte{wasmI32}, []byte{opI32Const, 0x80, 0x08}}, // i32.const 1024
		{abi.ExportEgressEnd, []byte{wasmI64, wasmI32, wasmI32}, []byte{wasmI32}, []byte{opLocalGet, 0, opCall, 0, opI32Const, byte(abi.StatusIdle)}},
	})
}

// The ends of requests the fence refused reach the guest in the order the
// requests were made (docs/abi.md §4), each once, within the call.
func TestFencedEndsAreDeliveredInRequestOrder(t *testing.T) {
	s := &timersOnly{}
	g := testGuest(s)
	g.mod = instantiateWasm(t, fencedEndGuest())
	g.fenced = []fencedEgress{{id: 5, msg: "a"}, {id: 2, msg: "b"}, {id: 9, msg: "c"}}
	require.NoError(t, g.endFenced(context.WithValue(t.Context(), guestKey{}, g), nil))
	assert.Equal(t, []uint64{5, 2, 9}, s.cleared)
	assert.Empty(t, g.fenced)

	export := errors.New("the export's own failure")
	g.fenced = []fencedEgress{{id: 1, msg: "a"}}
	require.Equal(t, export, g.endFenced(context.WithValue(t.Context(), guestKey{}, g), export), "the export's error wins over a delivered end")
	assert.Equal(t, []uint64{5, 2, 9, 1}, s.cleared)
}

// closingTimers is timersOnly whose ClearTimer(1) closes the module, as
// Guest.Close from another goroutine would while the guest is in that
// import.
type closingTimers struct {
	timersOnly
	mod api.Module
}

func (s *closingTimers) ClearTimer(id uint64) {
	s.timersOnly.ClearTimer(id)
	if id == 1 {
		_ = s.mod.CloseWithExitCode(context.Background(), exitClosed)
	}
}

// A guest closed while in an import stops at its next import, before that
// import does anything: nothing reaches the Services or the Conn from a
// closed guest.
func TestImportAfterCloseDoesNothing(t *testing.T) {
	timerClear := wasmImport{name: abi.ImportTimerClear, params: []byte{wasmI64}}
	mod := instantiateWasm(t, assemble([]wasmImport{timerClear}, []wasmFunc{
		// timer_clear(1); timer_clear(2)
		{"call", nil, nil, []byte{opI64Const, 1, opCall, 0, opI64Const, 2, opCall, 0}},
	}))
	s := &closingTimers{mod: mod}
	_, err := callAs(t.Context(), testGuest(s), mod, "call")
	var exit *sys.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, exitClosed, exit.ExitCode())
	assert.Equal(t, []uint64{1}, s.cleared, "the import after the close ran")
}
