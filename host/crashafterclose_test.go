package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Crash (a test's SIGKILL) on a host already closed, or crashed, finds
// nothing left to stop. Since closeDone (a second Close waits for the
// first), Crash closes that channel unconditionally, and a second close of
// a channel panics: a test that crashes a host its cleanup or a helper
// already closed dies in the panic.
func TestCrashAfterCloseOrCrashDoesNotPanic(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "a")
	require.NoError(t, h.Close(ctx))
	assert.NotPanics(t, h.Crash, "a crash after a Close")

	h = e.open(e.config())
	h.Crash()
	assert.NotPanics(t, h.Crash, "a second crash")
}
