package runtime_test

import (
	"context"
	"testing"

	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/stretchr/testify/require"
)

// A boot whose listing of the sessions to watch (the guest's opened, after
// the instance took its epoch) meets another connection's write lock, its
// busy timeout spent, serves all the same, as a boot whose sweep's listing
// fails does: the boot used to fail with "list sessions", and every
// request to the tree with it until the host's next boot. Nothing is
// lost: the failed sweep's retry (its re-arm failed too) recovers the
// turn once the lock is let go, and the resumed turn's deltas reach the
// host although no listing named its session (it is watched from its
// first event this instance commits).
func TestBootWhoseSessionListingMeetsAWriteLockServes(t *testing.T) {
	e, _ := newFaultEnv(t, 6, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	e.createAndPrompt("one two three four five six seven eight")
	e.fireTimers(120) // a few words in
	require.NoError(t, e.g.Close(context.Background()))
	clear(e.s.timers) // killed: its timers died with it
	e.s.wake = 0      // the host delivered the wake-up: used up

	take, release := e.lockFromAnother()
	var begins int
	err := e.boot(runtime.Options{Interpose: func(s runtime.Site) error {
		if s.Import == abi.ImportSQLBegin && !s.After && s.Phase == runtime.PhaseBoot {
			begins++
			if begins == 3 { // the migration's, the epoch's, then the listing's
				take()
			}
		}
		return nil
	}})
	require.NoError(t, err, "the boot failed where its listing of the sessions met a write lock")
	require.Equal(t, 3, begins, "the boot opened three transactions before its sweep")
	require.Equal(t, runtime.PhaseServe, e.g.Phase())
	require.GreaterOrEqual(t, e.s.wake, e.s.now+retry.Wake().Delay(0).Milliseconds(), "the failed sweep's retry, on the wake schedule")
	require.Empty(t, e.s.timers, "nothing waits for storage past the boot")

	release()
	require.NotNil(t, e.snapshot().Claim, "the turn keeps its claim")
	deltas := len(e.s.emitted("session.text.delta@1"))
	e.deliverWakes(5, 10*60_000)
	snap := e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 1}, e.terminals(), "the stopped turn went on and ended once")
	require.Equal(t, 1, e.count("session.execution.resumed@1"), "the turn was resumed once")
	require.Greater(t, len(e.s.emitted("session.text.delta@1")), deltas, "the resumed turn's deltas are emitted")
}

// lockFromAnother makes the next guest's connection one that waits for no
// lock (as one whose busy timeout is spent) and returns take and release
// of another connection's write lock. Under it the guest's reads fail
// too: each of its transactions begins as a write (BEGIN IMMEDIATE).
func (e *env) lockFromAnother() (take, release func()) {
	t := e.t
	mine, err := sqlitedb.Open(e.path, sqlitedb.Options{BusyTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { mine.Close() })
	e.db, e.conn = mine, mine.Conn()
	other := rivalConn(t, e.path)
	return func() { require.NoError(t, other.Begin()) }, func() { require.NoError(t, other.Rollback()) }
}
