package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A host import that panics while the guest boots (SQLite's connection
// panics when its memory cannot be mapped) does not panic out of Boot:
// wazero recovers a host function's panic and returns it as the call's
// error, so Boot fails and the guest is left broken. That is why
// serve.Start, and host's guestBackend.start above it, never see a panic
// once the guest is instantiated: serve closes a guest whose Boot failed,
// so nothing of it leaks.
func TestImportPanicInBootIsAnError(t *testing.T) {
	a := newEnv(t, 8, offlineConfig())
	err := a.boot(runtime.Options{Interpose: func(st runtime.Site) error {
		if st.Import == abi.ImportSQLBegin {
			panic("cannot allocate memory")
		}
		return nil
	}})
	require.ErrorContains(t, err, "cannot allocate memory")
	require.True(t, a.g.Closed(), "the guest is broken: serve closes it")
}
