package host_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
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

// A create whose boot panics with http.ErrAbortHandler is aborted as
// net/http's convention has it, in both modes alike: the connection is
// dropped with no answer (core/api's route passes the panic on in
// process, as the guest handler does), not answered 500.
func TestCreateAbortPanicDropsTheConnection(t *testing.T) {
	for _, guest := range []bool{false, true} {
		e := newEnv(t)
		cfg := e.config()
		if guest {
			cfg = e.guestConfig()
		}
		h := e.open(cfg)
		base := apiServer(t, h, guest)
		e.setGate(func(string) { panic(http.ErrAbortHandler) })
		req, err := http.NewRequest("POST", base+"/v1/sessions", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer alice-token")
		client := &http.Client{Transport: &http.Transport{}}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("guest %v: answered %d, not dropped", guest, resp.StatusCode)
		}
		client.CloseIdleConnections()
		e.setGate(nil)
		require.Equal(t, http.StatusCreated, call(t, base, "POST", "/v1/sessions", "alice-token", "").Status, "guest %v", guest)
		require.Empty(t, h.Busy(), "guest %v", guest)
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

// sameID mints the same tree id every time, so that a test can create
// through the API an id a failed create used.
type sameID string

func (s sameID) NewID() string { return string(s) }

// A create that panics once it has written its tree's index row (the boot,
// as in TestCreateBootPanicIs500AndLeavesNothingBusy; in process also the
// caller's init, the instance then running) is undone as a failed create
// is: the id is free again, and the next create of it is served, in
// process and with guests. Undone only by the next Open, the row, never
// ready, made that create ErrTreeExists (409) while a Get found no tree.
func TestCreatePanicFreesTheID(t *testing.T) {
	t.Run("boot in process", func(t *testing.T) {
		e := newEnv(t)
		h := e.open(e.config())
		e.setGate(func(string) { panic("cannot allocate memory") })
		require.PanicsWithValue(t, "cannot allocate memory", func() { _, _ = h.Create(ctx, "t", "alice", nil) })
		e.setGate(nil)
		e.tree(h, "t")
	})
	t.Run("init in process", func(t *testing.T) {
		e := newEnv(t)
		h := e.open(e.config())
		var started *core.Instance
		require.PanicsWithValue(t, "init panicked", func() {
			_, _ = h.Create(ctx, "t", "alice", func(inst *core.Instance) error {
				started = inst
				panic("init panicked")
			})
		})
		_, err := started.CreateSession(ctx, core.NewSession{ID: "t", Principal: "alice"})
		require.ErrorIs(t, err, core.ErrClosed, "the panicked create's instance still runs")
		e.tree(h, "t")
	})
	t.Run("boot with guests", func(t *testing.T) {
		e := newEnv(t)
		cfg := e.guestConfig()
		cfg.IDs = sameID("t")
		h := e.open(cfg)
		base := apiServer(t, h, true)
		e.setGate(func(string) { panic("cannot allocate memory") })
		require.Equal(t, http.StatusInternalServerError, call(t, base, "POST", "/v1/sessions", "alice-token", "").Status)
		e.setGate(nil)
		a := call(t, base, "POST", "/v1/sessions", "alice-token", "")
		require.Equal(t, http.StatusCreated, a.Status, a.raw)
	})
}
