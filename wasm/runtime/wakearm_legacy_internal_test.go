package runtime

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// callLegacyArm has a guest older than ABI 1.6, reduced to its one call
// of the legacy import, call wake_arm(at) for a Guest over s (the real
// guest imports wake_arm_checked since 1.6).
func callLegacyArm(t *testing.T, s Services, at int64) error {
	t.Helper()
	mod := instantiateWasm(t, importCaller(abi.ImportWakeArm, []byte{wasmI64}, nil))
	_, err := callAs(t.Context(), testGuest(s), mod, "call", uint64(at))
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
