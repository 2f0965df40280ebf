package runtime

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/abi"
)

// wake_arm_checked answers 0, the storage code of a refusal, "database
// closed" (as an SQL result does) for closed storage, whatever wraps it,
// and SQLITE_ERROR for anything else.
func TestWakeArmCode(t *testing.T) {
	assert.Equal(t, int32(0), wakeArmCode(nil))
	assert.Equal(t, int32(storage.CodeFull), wakeArmCode(fmt.Errorf("arm: %w", &storage.Error{Code: storage.CodeFull})))
	assert.Equal(t, int32(abi.SQLCodeClosed), wakeArmCode(fmt.Errorf("arm wake-up of tree t: tree not found: %w", storage.ErrClosed)))
	assert.Equal(t, int32(abi.SQLCodeClosed), wakeArmCode(storage.ErrClosed))
	assert.Equal(t, int32(storage.CodeError), wakeArmCode(errors.New("something else")))
}
