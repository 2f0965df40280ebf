package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// armOnly is a Services whose ArmWake answers err and records each call;
// nothing else is used.
type armOnly struct {
	Services
	err   error
	armed []int64
}

func (s *armOnly) ArmWake(at int64) error {
	s.armed = append(s.armed, at)
	return s.err
}

// legacyWakeArmGuest is a guest older than ABI 1.6 reduced to its one
// call of the legacy import: a module importing revenant.wake_arm
// (at i64) and exporting "arm" (at i64), which calls it. Hand-assembled:
// the real guest imports wake_arm_checked since 1.6.
func legacyWakeArmGuest() []byte {
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	section := func(id byte, body ...byte) []byte { return append([]byte{id, byte(len(body))}, body...) }
	imp := append(append([]byte{1}, name(abi.ImportModule)...), name(abi.ImportWakeArm)...)
	imp = append(imp, 0x00, 0x00) // a function of type 0
	exp := append(append([]byte{1}, name("arm")...), 0x00, 0x01)
	var m []byte
	m = append(m, 0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00)
	m = append(m, section(1, 1, 0x60, 1, 0x7e, 0)...) // type 0: (i64) -> ()
	m = append(m, section(2, imp...)...)
	m = append(m, section(3, 1, 0)...) // function 1 has type 0
	m = append(m, section(7, exp...)...)
	// function 1: local.get 0; call 0; end
	m = append(m, section(10, 1, 6, 0, 0x20, 0, 0x10, 0, 0x0b)...)
	return m
}

// callLegacyArm runs the legacy guest's arm(at) on the runtime's import
// module, for a Guest over s.
func callLegacyArm(t *testing.T, s Services, at int64) error {
	t.Helper()
	ctx := t.Context()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	require.NoError(t, instantiateImports(ctx, r))
	mod, err := r.Instantiate(ctx, legacyWakeArmGuest())
	require.NoError(t, err)
	g := &Guest{opts: Options{Services: s}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, err = mod.ExportedFunction("arm").Call(context.WithValue(ctx, guestKey{}, g), uint64(at))
	return err
}

// A guest older than 1.6 imports wake_arm, which has no result: when the
// host cannot store the wake-up, the call must fail in the guest (a
// trap, whose transaction is then rolled back), never return as if
// stored, or the guest commits a claim with no wake-up (DESIGN §4 wake
// rule 1).
func TestLegacyWakeArmTrapsWhenTheHostCannotStoreIt(t *testing.T) {
	s := &armOnly{}
	require.NoError(t, callLegacyArm(t, s, 1234), "a stored wake-up returns")
	assert.Equal(t, []int64{1234}, s.armed)

	s = &armOnly{err: &storage.Error{Code: storage.CodeFull, Msg: "database or disk is full"}}
	err := callLegacyArm(t, s, 5678)
	require.Error(t, err, "the guest's call fails: it cannot hear of the failure otherwise")
	assert.Contains(t, err.Error(), "store the guest's wake-up")
	assert.Equal(t, []int64{5678}, s.armed)

	s = &armOnly{err: fmt.Errorf("arm wake-up of tree t: %w", storage.ErrClosed)}
	assert.Error(t, callLegacyArm(t, s, 9), "closed storage fails the call too")
}
