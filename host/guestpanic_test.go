package host_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A panic while a create boots its tree (SQLite's connection panics when
// its memory cannot be mapped: a create past the process's address-space
// limit) is a 500 internal with a JSON body in both modes (in guest mode
// the host's own handler answers it, as core/api's routes do in process,
// not a connection dropped with no answer), and it leaves nothing busy:
// the next create is served and no tree's entry is busy (the panicked
// one stayed busy for good, and Close waited on it without end).
func TestCreateBootPanicIs500AndLeavesNothingBusy(t *testing.T) {
	for _, guest := range []bool{false, true} {
		e := newEnv(t)
		cfg := e.config()
		if guest {
			cfg = e.guestConfig()
		}
		h := e.open(cfg)
		base := apiServer(t, h, guest)
		e.setGate(func(string) { panic("cannot allocate memory") })
		a := call(t, base, "POST", "/v1/sessions", "alice-token", "")
		require.Equal(t, http.StatusInternalServerError, a.Status, "guest %v: %s", guest, a.raw)
		require.Equal(t, "internal", a.Type, "guest %v", guest)

		e.setGate(nil)
		a = call(t, base, "POST", "/v1/sessions", "alice-token", "")
		require.Equal(t, http.StatusCreated, a.Status, "guest %v: %s", guest, a.raw)

		require.Empty(t, h.Busy(), "guest %v: the panicked create's tree stayed busy (Close would wait on it)", guest)
		require.NoError(t, h.Close(context.Background()))
	}
}

// A panic while a Get boots a closed tree (the path every request and
// wake-up takes to a tree not open) panics on to the caller, and the
// boot's entry is failed, not left busy: the next Get boots the tree, and
// Close does not wait on it.
func TestGetBootPanicPanicsOnAndLeavesNothingBusy(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	e.tree(h, "t")
	e.clock.Advance(time.Minute) // the idle timeout
	require.Equal(t, 1, h.EvictIdle(ctx))

	e.setGate(func(string) { panic("cannot allocate memory") })
	require.PanicsWithValue(t, "cannot allocate memory", func() { _, _, _ = h.Get(ctx, "t") })
	require.Empty(t, h.Busy(), "the panicked boot's tree stayed busy (every request for it, and Close, would wait on it)")

	e.setGate(nil)
	inst, _, err := h.Get(ctx, "t")
	require.NoError(t, err)
	require.NotNil(t, inst)
}
