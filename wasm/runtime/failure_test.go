package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// scenario runs a scripted tree from a seed and returns the services' log:
// every import the guest made, with its arguments, in order.
func scenario(t *testing.T, seed uint64) string {
	e := newEnv(t, seed, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("determinism is a property of the inputs")
	e.snapshot()
	e.fireTimers(60_000)
	e.snapshot()
	e.do("GET", "/v1/sessions/"+treeID+"/events?after=0", nil)
	require.NoError(t, e.g.CancelRequest(context.Background(), e.next))
	return e.s.log.String()
}

func TestSameInputsSameOutputs(t *testing.T) {
	a := scenario(t, 7)
	b := scenario(t, 7)
	require.NotEmpty(t, a)
	require.Equal(t, a, b, "two runs from the same inputs differ")
	require.Contains(t, a, "session.execution.succeeded@1")
	c := scenario(t, 8)
	require.NotEqual(t, a, c, "the seed reaches the ids")
}

func TestGuestRefusesUnknownMajorVersion(t *testing.T) {
	e := newEnv(t, 1, offlineConfig())
	err := e.boot(runtime.Options{HostVersion: abi.PackVersion(abi.Major+1, 0)})
	require.ErrorIs(t, err, runtime.ErrVersion)
	require.False(t, e.g.Closed(), "a refused boot leaves the guest usable")
	require.ErrorIs(t, e.g.Wake(context.Background()), runtime.ErrNotBooted)
	// The same guest boots with the right version.
	cfg := e.cfg
	cfg.HostMajor, cfg.HostMinor = abi.Major, abi.Minor
	require.NoError(t, e.g.Boot(context.Background(), cfg))
}

var errKill = errors.New("nemesis")

// killer kills at the n-th occurrence of a site once armed.
type killer struct {
	armed  bool
	site   runtime.Site
	n, hit int
	sites  []runtime.Site
}

func (k *killer) interpose(s runtime.Site) error {
	if !k.armed {
		return nil
	}
	k.sites = append(k.sites, s)
	if s.Import == k.site.Import && s.After == k.site.After {
		k.hit++
		if k.hit == k.n {
			k.armed = false
			return errKill
		}
	}
	return nil
}

// drive delivers timers and the wake-up until the guest dies or nothing is
// left before limit; it reports the error that killed the guest.
func (e *env) drive(limit int64) error {
	end := e.s.now + limit
	for {
		id, at, ok := e.s.nextTimer()
		wakeDue := e.s.wake != 0 && e.s.wake <= end && (!ok || e.s.wake < at)
		if wakeDue {
			e.s.now = max(e.s.now, e.s.wake)
			e.s.wake = 0
			if err := e.g.Wake(context.Background()); err != nil {
				return err
			}
			continue
		}
		if !ok || at > end {
			return nil
		}
		e.s.now = max(e.s.now, at)
		delete(e.s.timers, id)
		if err := e.g.Timer(context.Background(), id); err != nil {
			return err
		}
	}
}

// Kill the guest before and after each commit of a turn, boot a fresh
// guest on the same database, and check the turn still reaches exactly one
// terminal.
func TestKillAroundCommitsThenResume(t *testing.T) {
	// Count the turn's commits in a clean run.
	k := &killer{site: runtime.Site{Import: abi.ImportSQLCommit}, n: -1}
	e := newEnv(t, 11, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{Interpose: k.interpose}))
	k.armed = false
	e.createAndPrompt("one two three four five six")
	k.armed = true
	require.NoError(t, e.drive(120_000))
	commits := k.hit
	require.Greater(t, commits, 3)
	require.Equal(t, 1, e.snapshot().Turns)

	for n := 1; n <= commits; n++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("commit%d/after=%v", n, after), func(t *testing.T) {
				k := &killer{site: runtime.Site{Import: abi.ImportSQLCommit, After: after}, n: n}
				e := newEnv(t, 11, offlineConfig())
				require.NoError(t, e.boot(runtime.Options{Interpose: k.interpose}))
				e.createAndPrompt("one two three four five six")
				k.armed = true
				err := e.drive(120_000)
				require.ErrorIs(t, err, runtime.ErrKilled)
				require.ErrorIs(t, err, errKill)
				require.True(t, e.g.Closed())
				require.ErrorIs(t, e.g.Wake(context.Background()), runtime.ErrGuestClosed)
				require.False(t, e.conn.InTx(), "the dead guest's transaction was rolled back")

				// A fresh guest on the same database: the timers of the dead
				// one are gone with it.
				clear(e.s.timers)
				require.NoError(t, e.boot(runtime.Options{}))
				require.NoError(t, e.drive(600_000))
				snap := e.snapshot()
				require.Equal(t, "idle", snap.Status, "%+v", snap)
				require.Equal(t, 1, snap.Turns)
				require.Empty(t, snap.Prompts)
				require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals())
			})
		}
	}
}

// flaky is services whose Emit traps once, or whose clock stalls once past
// the watchdog.
type flaky struct {
	*services
	panicEmit bool
	stall     time.Duration
}

func (f *flaky) Emit(ev runtime.Emitted) {
	if f.panicEmit {
		f.panicEmit = false
		panic("emit failed")
	}
	f.services.Emit(ev)
}

func (f *flaky) Now() int64 {
	if f.stall > 0 {
		// The watchdog is wall-clock: a host call slower than it stands in
		// for a guest that hangs.
		d := f.stall
		f.stall = 0
		time.Sleep(d)
	}
	return f.services.Now()
}

// testWatchdog is the watchdog of the tests that provoke it: long enough
// that a boot on a loaded machine (a CI runner busy with other suites)
// never meets it, so only the stalled host call does.
const testWatchdog = time.Second

func TestTrapAndWatchdogReplaceTheGuest(t *testing.T) {
	e := newEnv(t, 5, offlineConfig())
	f := &flaky{services: e.s}
	boot := func() {
		g, err := compiled(t).Instantiate(context.Background(), runtime.Options{Conn: e.conn, Services: f, Watchdog: testWatchdog})
		require.NoError(t, err)
		t.Cleanup(func() { g.Close(context.Background()) })
		e.g = g
		require.NoError(t, g.Boot(context.Background(), e.cfg))
	}
	boot()
	e.createAndPrompt("trap me")

	f.panicEmit = true
	err := e.drive(60_000)
	require.ErrorIs(t, err, runtime.ErrTrapped)
	require.True(t, e.g.Closed())
	require.False(t, e.conn.InTx())

	clear(e.s.timers)
	boot()
	f.stall = 3 * testWatchdog
	err = e.g.Wake(context.Background())
	require.ErrorIs(t, err, runtime.ErrWatchdog)
	require.True(t, e.g.Closed())
	require.False(t, e.conn.InTx())

	clear(e.s.timers)
	boot()
	require.NoError(t, e.drive(600_000))
	snap := e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals())
}

// With CompileOptions.Interruptible, wazero stops the guest anywhere; the
// watchdog fails the call the same way.
func TestInterruptibleWatchdog(t *testing.T) {
	m, err := runtime.Compile(context.Background(), guestbuild.Must(t), runtime.CompileOptions{CacheDir: guestbuild.CacheDir(), Interruptible: true})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close(context.Background()) })
	e := newEnv(t, 5, offlineConfig())
	f := &flaky{services: e.s}
	g, err := m.Instantiate(context.Background(), runtime.Options{Conn: e.conn, Services: f, Watchdog: testWatchdog})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(context.Background()) })
	e.g = g
	require.NoError(t, g.Boot(context.Background(), e.cfg))
	e.createAndPrompt("stall me")
	f.stall = 3 * testWatchdog
	require.ErrorIs(t, g.Wake(context.Background()), runtime.ErrWatchdog)
	require.True(t, g.Closed())
	require.False(t, e.conn.InTx())
}

// Close from another goroutine while a call runs in the guest (here: in
// its sql_commit import): the call fails with ErrGuestClosed, the guest's
// memory stays mapped until it returned (it is unmapped then, not while
// guest code may run), and a fresh guest finishes the turn.
func TestCloseDuringCall(t *testing.T) {
	e := newEnv(t, 12, offlineConfig())
	armed, closed := false, false
	interpose := func(s runtime.Site) error {
		if !armed || closed || s.Import != abi.ImportSQLCommit || s.After {
			return nil
		}
		closed = true
		done := make(chan struct{})
		g := e.g
		go func() {
			defer close(done)
			require.NoError(t, g.Close(context.Background()))
		}()
		<-done
		return nil
	}
	require.NoError(t, e.boot(runtime.Options{Interpose: interpose}))
	e.createAndPrompt("close me")
	armed = true
	err := e.drive(120_000)
	require.ErrorIs(t, err, runtime.ErrGuestClosed)
	require.True(t, closed)
	require.True(t, e.g.Closed())
	require.False(t, e.conn.InTx())

	clear(e.s.timers)
	require.NoError(t, e.boot(runtime.Options{}))
	require.NoError(t, e.drive(600_000))
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals())
}
