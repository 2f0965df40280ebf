package runtime_test

import (
	"context"
	"encoding/base32"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

func offlineConfig() runtime.BootConfig {
	return runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: 50 * time.Millisecond}}
}

func TestOfflineTurnSucceeds(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	require.Equal(t, runtime.PhaseServe, e.g.Phase())
	e.createAndPrompt("hello wasm world")

	snap := e.snapshot()
	require.Equal(t, "busy", snap.Status)
	e.fireTimers(60_000)

	snap = e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, 1, snap.Turns)
	require.Len(t, e.s.emitted("session.execution.succeeded@1"), 1)
	require.NotEmpty(t, e.s.emitted("session.text.delta@1"), "live deltas are emitted")
	last := snap.Messages[len(snap.Messages)-1]
	require.Equal(t, "assistant", last.Role)
	require.Contains(t, last.Text, "hello wasm world")

	// Durable emits arrive in commit order with contiguous seqs.
	var seq int64
	for _, ev := range e.s.emits {
		if ev.Durable() {
			require.Equal(t, seq+1, ev.Seq, "%s", ev.Type)
			seq = ev.Seq
		}
	}
	require.Equal(t, snap.Cursor, seq)
}

// Idle tells whether an execution runs in the guest (core.Instance.Idle),
// so a host can evict an idle guest as it would an in-process instance.
func TestIdleWhileNoExecutionRuns(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1, offlineConfig())
	g, err := compiled(t).Instantiate(ctx, runtime.Options{Conn: e.conn, Services: e.s})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(ctx) })
	_, err = g.Idle(ctx)
	require.ErrorIs(t, err, runtime.ErrNotBooted)
	require.NoError(t, g.Boot(ctx, e.cfg))
	e.g = g
	idle := func() bool {
		t.Helper()
		ok, err := g.Idle(ctx)
		require.NoError(t, err)
		return ok
	}
	require.True(t, idle(), "booted with nothing to run")
	e.createAndPrompt("one two three")
	require.False(t, idle(), "the turn runs (it waits on a timer)")
	require.NotNil(t, e.snapshot().Claim)
	require.False(t, idle(), "a request in between changes nothing")
	e.fireTimers(60_000)
	require.Equal(t, "idle", e.snapshot().Status)
	require.True(t, idle(), "the turn ended")
	require.Equal(t, runtime.PhaseServe, g.Phase(), "Idle runs nothing")
}

// DiagSQL runs its statements in one transaction through the SQL imports.
func TestDiagSQL(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1, offlineConfig())
	var sites []string
	counting := false
	require.NoError(t, e.boot(runtime.Options{Interpose: func(s runtime.Site) error {
		if counting && !s.After {
			sites = append(sites, s.Import)
		}
		return nil
	}}))
	counting = true
	require.NoError(t, e.g.DiagSQL(ctx, 3))
	require.Equal(t, []string{abi.ImportSQLBegin, abi.ImportSQLQuery, abi.ImportSQLQuery, abi.ImportSQLQuery, abi.ImportSQLCommit}, sites)
	require.False(t, e.conn.InTx())
	require.NoError(t, e.g.DiagSQL(ctx, 0))

	// A count the guest's i32 cannot hold is refused before the guest
	// runs: it would read a negative or wrapped count.
	sites = nil
	for _, n := range []int{-1, 1 << 31} {
		require.ErrorContains(t, e.g.DiagSQL(ctx, n), "out of range", "n %d", n)
	}
	require.Empty(t, sites, "no statement ran")
	require.False(t, e.g.Closed())
}

// A negative watchdog means none (a simulator wants no wall clock
// anywhere), not one already past: the guest's calls run.
func TestNegativeWatchdogMeansNone(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{Watchdog: -1}))
	e.createAndPrompt("no watchdog")
	e.fireTimers(60_000)
	require.Equal(t, "idle", e.snapshot().Status)
	require.Len(t, e.s.emitted("session.execution.succeeded@1"), 1)
}

// A failure the guest reports for one call is a *GuestError carrying the
// guest's own message (its fail import), and the guest stays usable.
func TestGuestErrorCarriesTheGuestsMessage(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	err := e.g.Boot(context.Background(), e.cfg)
	var ge *runtime.GuestError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, abi.ExportBoot, ge.Export)
	require.Equal(t, "boot: already booted", ge.Msg)
	require.Equal(t, "wasm guest: "+abi.ExportBoot+": boot: already booted", err.Error())
	require.False(t, e.g.Closed())
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, "the guest still serves: %s", r.body.String())
}

// The request's query reaches the guest's handler: a limit it refuses is
// answered 400.
func TestRequestCarriesItsQuery(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("hi")
	r := e.do("GET", "/v1/sessions/"+treeID+"?limit=0", nil)
	require.Equal(t, 400, r.status, r.body.String())
	require.Contains(t, r.body.String(), "limit")
	r = e.do("GET", "/v1/sessions/"+treeID+"?limit=1", nil)
	require.Equal(t, 200, r.status, r.body.String())
}

// A guest without an export of a later minor version answers
// ErrUnsupported, which callers test as errors.ErrUnsupported.
func TestErrUnsupportedIsErrorsErrUnsupported(t *testing.T) {
	require.ErrorIs(t, runtime.ErrUnsupported, errors.ErrUnsupported)
}

// Both Conn and Services are required.
func TestInstantiateRequiresConnAndServices(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	for name, opts := range map[string]runtime.Options{
		"no services": {Conn: e.conn},
		"no conn":     {Services: e.s},
	} {
		_, err := compiled(t).Instantiate(context.Background(), opts)
		require.ErrorContains(t, err, "Conn and Services are required", name)
	}
}

// Every call but Boot is refused before a successful boot without running
// the guest: none of its imports is reached (DiagSQL's export would run
// its statements on an unbooted guest).
func TestCallsBeforeBootRunNoGuestCode(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1, offlineConfig())
	var sites []runtime.Site
	g, err := compiled(t).Instantiate(ctx, runtime.Options{Conn: e.conn, Services: e.s, Interpose: func(s runtime.Site) error {
		sites = append(sites, s)
		return nil
	}})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(ctx) })
	require.ErrorIs(t, g.DiagSQL(ctx, 1), runtime.ErrNotBooted)
	require.ErrorIs(t, g.Wake(ctx), runtime.ErrNotBooted)
	require.ErrorIs(t, g.Request(ctx, 1, runtime.Request{Method: "GET", Path: "/v1/sessions/" + treeID}), runtime.ErrNotBooted)
	require.Empty(t, sites, "the guest ran")
	require.Empty(t, e.s.log.String())
	require.NoError(t, g.Boot(ctx, e.cfg), "the guest boots after all")
}

// A boot that fails after the instance opened (here the API's tokens do
// not parse) leaves the guest unbooted, as Boot documents: the host can
// boot it again with a configuration that works, and it serves.
func TestFailedBootCanBeBootedAgain(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	good := e.cfg
	e.cfg.API.Tokens = "no-colon"
	var ge *runtime.GuestError
	require.ErrorAs(t, e.boot(runtime.Options{}), &ge)
	require.Contains(t, ge.Msg, "REVENANT_TOKENS")
	require.False(t, e.g.Closed())

	require.NoError(t, e.g.Boot(context.Background(), good))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())
}

// A queue_cap past settings.MaxQueueCap fails the guest's boot with the
// settings' own error, as it fails a config file's load on the local
// server: the guest reports it (a *GuestError, not a trap) and boots
// after all with a configuration that works.
func TestBootRefusesAQueueCapPastItsBound(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	good := e.cfg
	e.cfg.Settings.QueueCap = settings.MaxQueueCap + 1
	var ge *runtime.GuestError
	require.ErrorAs(t, e.boot(runtime.Options{}), &ge)
	require.Contains(t, ge.Msg, "queue_cap: 1001 is above the largest allowed, 1000")
	require.False(t, e.g.Closed())

	require.NoError(t, e.g.Boot(context.Background(), good))
}

// The guest's ids are 128 random bits in unpadded lower-case base32, as
// the host's RandomIDs mints them: each decodes to 16 bytes and encodes
// back to itself (the last character's two pad bits are zero).
func TestGuestIDsAreCanonicalBase32(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("ids")
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	ids := e.loggedIDs()
	require.NotEmpty(t, ids)
	for _, id := range ids {
		require.Len(t, id, 26)
		b, err := enc.DecodeString(strings.ToUpper(id))
		require.NoError(t, err, id)
		require.Len(t, b, 16, id)
		require.Equal(t, id, strings.ToLower(enc.EncodeToString(b)), "not canonical")
	}
}

// The host passes the request's path as the client sent it, escaped; the
// guest routes by the unescaped path, as net/http does.
func TestEscapedRequestPathIsUnescaped(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("hi")
	r := e.do("GET", "/v1/sessions/tree%31", nil)
	require.Equal(t, 200, r.status, r.body.String())
	require.Equal(t, treeID, decode[map[string]any](t, r)["id"])
}

// The offline model's words wait on host timers set WordDelay ahead on
// the host's clock (the guest never uses a Go runtime timer), and an
// interrupt stops the turn's timers on the host too: none is left to fire.
func TestTurnTimersAreTheHostsAndAnInterruptClearsThem(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("one two three four")
	var ats []int64
	for _, at := range e.s.timers {
		ats = append(ats, at)
	}
	require.Contains(t, ats, e.s.now+offlineConfig().Model.WordDelay.Milliseconds(), "the next word's timer")

	r := e.do("POST", "/v1/sessions/"+treeID+"/interrupt", nil)
	require.Equal(t, 200, r.status, r.body.String())
	require.Empty(t, e.s.timers, "the interrupted turn left host timers set")
}

// Deleting the tree clears its wake-up (nothing is left to sweep) and the
// guest serves nothing of it afterwards: the tree is gone, not failing,
// and its id is not created again in this guest (the host drops the
// database file).
func TestDeletedTreeIsGoneWithItsWakeup(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("one two three")
	require.NotZero(t, e.s.wake, "the turn armed a wake-up")

	r := e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 204, r.status, r.body.String())
	require.Zero(t, e.s.wake, "the deleted tree's wake-up is cleared")
	r = e.do("GET", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 404, r.status, r.body.String())
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "again", "id": "p2"})
	require.Equal(t, 404, r.status, r.body.String())
	r = e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 409, r.status, r.body.String())
}
