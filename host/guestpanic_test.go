package host_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/sqlitedb"
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
		e, h := openIn(t, guest)
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
		e, h := openIn(t, guest)
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

// panickingIDs is an ID source that panics while armed: core.Open takes
// its owner token from it after the tree's file is open, so an armed one
// makes the boot panic with the database open (as SQLite's connection
// does when its memory cannot be mapped in a migration's query).
type panickingIDs struct {
	core.IDSource
	armed atomic.Bool
}

func (p *panickingIDs) NewID() string {
	if p.armed.Load() {
		panic("cannot allocate memory")
	}
	return p.IDSource.NewID()
}

// openFiles counts this process's open file descriptors on path (its
// -wal and -shm too), from /proc/self/fd.
func openFiles(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count open files: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, path) {
			n++
		}
	}
	return n
}

// A boot that panics after it opened the tree's database (in the
// instance's start: migrations, the epoch, the sweep) closes that
// database before it panics on. Left open, the connection (its file
// handles, and its mapped memory, the very thing that ran out) leaked
// with each request that booted the tree, past MaxOpenTrees, which counts
// only the entries, and the failed one was dropped.
func TestBootPanicAfterOpenClosesTheDatabase(t *testing.T) {
	e := newEnv(t)
	ids := &panickingIDs{IDSource: e.ids}
	cfg := e.config()
	cfg.IDs = ids
	h := e.open(cfg)
	e.tree(h, "t")
	e.clock.Advance(time.Minute) // the idle timeout
	require.Equal(t, 1, h.EvictIdle(ctx))
	require.Zero(t, openFiles(t, e.treePath("t")), "the evicted tree's database is closed")

	ids.armed.Store(true)
	require.PanicsWithValue(t, "cannot allocate memory", func() { _, _, _ = h.Get(ctx, "t") })
	require.Empty(t, h.Busy())
	require.Zero(t, openFiles(t, e.treePath("t")), "the panicked boot's database was left open")

	ids.armed.Store(false)
	inst, _, err := h.Get(ctx, "t")
	require.NoError(t, err)
	require.NotNil(t, inst)
}

// A create whose init panics (SQLite's connection cannot map its memory
// as the root session is written) is undone as a failed init is: the
// tree's instance and database closed, its index row and files removed,
// so the id can be created again. It used to leave the instance running
// and the database open, unreachable (the entry dropped), and the row,
// which refused the id's next create as taken until the server restarted.
func TestCreateInitPanicUndoesTheCreate(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	require.PanicsWithValue(t, "cannot allocate memory", func() {
		_, _ = h.Create(ctx, "t", "alice", func(*core.Instance) error { panic("cannot allocate memory") })
	})
	require.Empty(t, h.Busy())
	require.Zero(t, openFiles(t, e.treePath("t")), "the panicked create's database was left open")
	require.False(t, exists(e.treePath("t")), "the panicked create's files are removed")

	e.tree(h, "t")
}

// sameID mints the same tree id every time, so that a test can create
// through the API an id a failed create used.
type sameID string

func (s sameID) NewID() string { return string(s) }

// A create that panics once it has written its tree's index row (the boot,
// as in TestCreateBootPanicIs500AndLeavesNothingBusy; in process also the
// caller's init: TestCreateInitPanicUndoesTheCreate) is undone as a failed create
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

// A boot that a tree's wake-up runs and that panics is under no HTTP
// handler: the panic used to end the process, every other tree with it.
// It is recovered and logged, counted as a boot failure, and the wake-up
// is retried as a failed boot's is; the host serves on meanwhile.
func TestWakeupBootPanicIsRetried(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	h := e.open(e.config())
	inst := e.tree(h, "t")
	admit(t, inst, "t", "die once")
	e.d.next(t)
	idle(t, inst)
	e.clock.Advance(time.Minute) // the idle timeout
	require.Equal(t, 1, h.EvictIdle(ctx))
	failures := h.Stats().BootFailures

	e.setGate(func(string) { panic("cannot allocate memory") })
	e.clock.Set(treeStart(time.Hour))
	d := e.nextDelivery()
	require.Equal(t, "t", d.id)
	require.ErrorContains(t, d.err, "panicked: cannot allocate memory")
	require.Equal(t, failures+1, h.Stats().BootFailures, "the panicked boot counts as a failed one")
	require.Empty(t, h.Busy())
	require.Contains(t, e.wakeups(), "t", "the wake-up row is kept for the retry")

	e.setGate(nil)
	e.tree(h, "other") // the host serves on
	e.clock.Advance(retry.Wake().Delay(0))
	e.d.next(t) // the retry boots the tree and its sweep resumes the turn
	require.NoError(t, e.nextDelivery().err)
	require.NotNil(t, h.OpenInstance("t"))
}

// A wake-up delivered to a running tree whose wake panics (SQLite's
// connection cannot map its memory in the sweep) is recovered as a
// wake-up's boot panic is, and the tree stops counting in use as the
// delivery ends: at the cap, the next tree's open closes it. The hold the
// delivery took was ended only when the wake returned, so a panic, once
// recovered, left the tree in use for good: no eviction, idle or for the
// cap, would close it again, and at MaxOpenTrees 1 every other tree was
// refused ErrTooManyOpen.
func TestWakeupSweepPanicLeavesTheTreeClosable(t *testing.T) {
	e := newEnv(t)
	e.core = e.core.WithWakeInterval(time.Hour)
	var panicking atomic.Bool
	panicking.Store(true)
	cfg := host.WithWakingHook(withCap(e.config(), 1, nil), func(string) {
		if panicking.Swap(false) {
			panic("cannot allocate memory")
		}
	})
	h := e.open(cfg)
	inst := e.tree(h, "claimed")
	admit(t, inst, "claimed", "die once")
	e.d.next(t)
	idle(t, inst) // the claim stays, no execution runs: nothing uses the tree

	e.clock.Set(treeStart(time.Hour))
	d := e.nextDelivery()
	require.Equal(t, "claimed", d.id)
	require.ErrorContains(t, d.err, "panicked: cannot allocate memory")

	_, err := h.Create(ctx, "other", "alice", nil)
	require.NoError(t, err, "the tree whose wake-up panicked is in use by nothing: the cap closes it")
	require.Nil(t, h.OpenInstance("claimed"))
}

// headThenPanicRuntime starts trees whose requests, once panicking is
// set, send the head and part of the body, then panic.
type headThenPanicRuntime struct {
	host.GuestRuntime
	panicking *atomic.Bool
}

func (r headThenPanicRuntime) StartTree(ctx context.Context, id string, conn *sqlitedb.Conn, arm func(at int64) error, log *slog.Logger) (host.GuestTree, error) {
	t, err := r.GuestRuntime.StartTree(ctx, id, conn, arm, log)
	if err != nil {
		return nil, err
	}
	return headThenPanicTree{t, r.panicking}, nil
}

type headThenPanicTree struct {
	host.GuestTree
	panicking *atomic.Bool
}

func (t headThenPanicTree) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !t.panicking.Load() {
		t.GuestTree.ServeHTTP(w, r)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`{"id":`))
	w.(http.Flusher).Flush() // the head and the part are out
	panic("answer cut short")
}

// A guest's request that panics once the head is out (an event stream, a
// 200 body begun) is aborted, as core/api aborts it in process: the
// client's read fails. It used to get a second header (ignored) and the
// JSON error appended to the body, a 200 whose body read as complete.
// The panic is logged at error level with its stack, method and path.
func TestGuestPanicAfterTheHeadAbortsTheResponse(t *testing.T) {
	e := newEnv(t)
	cfg := e.guestConfig()
	var panicking atomic.Bool
	cfg.Guest = headThenPanicRuntime{cfg.Guest, &panicking}
	h := e.open(cfg)
	auth, err := api.ParseTokens(tokenSpec)
	require.NoError(t, err)
	var log bytes.Buffer
	g, err := host.NewGuestHandler(h, auth, api.NewConfig(), slog.New(slog.NewTextHandler(&log, nil)))
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)

	a := call(t, srv.URL, "POST", "/v1/sessions", "alice-token", "")
	require.Equal(t, http.StatusCreated, a.Status, a.raw)
	id := a.Body["id"].(string)

	panicking.Store(true)
	req, err := http.NewRequest("GET", srv.URL+"/v1/sessions/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.Error(t, err, "the response is cut short, not completed with an error: %s", body)
	require.Equal(t, `{"id":`, string(body))
	require.Contains(t, log.String(), "level=ERROR")
	require.Contains(t, log.String(), "handler panicked")
	require.Contains(t, log.String(), "method=GET path=/v1/sessions/"+id)
	require.Contains(t, log.String(), "headThenPanicTree", "the stack")
	require.NotContains(t, log.String(), "alice-token")
}

// Under serve -guest, a route that fails inside the guest once its head is
// out (the test guest's hook panics its first body write, as a route's bug
// would) reaches the client cut short, as in process: the guest ends the
// answer aborted (docs/abi.md §6) and the host's handler passes the abort
// on to net/http. The host used to end it cleanly: a 200 with an empty
// body that read as complete.
func TestGuestRouteFailingAfterItsHeadIsCut(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfigOf(guestbuild.MustTestHooks(t)))
	base := apiServer(t, h, true)
	a := call(t, base, "POST", "/v1/sessions", "alice-token", "")
	require.Equal(t, http.StatusCreated, a.Status, a.raw)
	id := a.Body["id"].(string)

	req, err := http.NewRequest("GET", base+"/v1/sessions/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("X-Revenant-Test-Hook", "fail-after-head")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		body, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Error(t, readErr, "the answer cut short read as complete: %d %q", resp.StatusCode, body)
	}
	require.Equal(t, http.StatusOK, call(t, base, "GET", "/v1/sessions/"+id, "alice-token", "").Status, "the tree serves on")
}
