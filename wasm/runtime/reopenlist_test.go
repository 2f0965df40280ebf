package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// The wake-up that reopens the instance a failed delete closed boots it
// again as a boot does, and its listing of the sessions to watch meets
// another connection's write lock as a boot's may
// (TestBootWhoseSessionListingMeetsAWriteLockServes): it serves all the
// same, logging the refusal. The reopening used to fail with "list
// sessions", leaving the closed instance, which refuses every write with
// a 503, until a later wake-up on the back-off schedule reopened it.
// Nothing is lost: the failed sweep's retry resumes the stopped turn once
// the lock is let go, and that turn's deltas reach the host although no
// listing named its session.
func TestReopenWhoseSessionListingMeetsAWriteLockServes(t *testing.T) {
	e, f := newFaultEnv(t, 7, offlineConfig())
	take, release := e.lockFromAnother()
	// The guest's connection goes through the fault VFS too, so its
	// delete can fail on a full disk.
	name := fmt.Sprintf("runtime-test-fault-%d", faultSeq.Add(1))
	faultvfs.Register(name, f)
	t.Cleanup(func() { faultvfs.Unregister(name) })
	mine, err := sqlitedb.Open(e.path, sqlitedb.Options{VFS: name, BusyTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { mine.Close() })
	e.db, e.conn = mine, mine.Conn()

	var logged bytes.Buffer
	reopening, begins := false, 0
	require.NoError(t, e.boot(runtime.Options{Log: slog.New(slog.NewTextHandler(&logged, nil)), Interpose: func(s runtime.Site) error {
		if reopening && s.Import == abi.ImportSQLBegin && !s.After && s.Phase == runtime.PhaseSweep {
			begins++
			if begins == 3 { // the migration's, the epoch's (which checks the closed instance's), then the listing's
				take()
			}
		}
		return nil
	}}))
	e.createAndPrompt("one two three four five six seven eight")
	e.fireTimers(120) // a few words in

	f.FailFor(10*time.Minute, faultvfs.Full)
	r := e.do("DELETE", "/v1/sessions/"+treeID, nil)
	require.Equal(t, 503, r.status, r.body.String())
	require.NotZero(t, e.s.wake, "the closed instance's reopening is armed")
	f.Heal()

	reopening = true
	e.s.now = max(e.s.now, e.s.wake)
	e.s.wake = 0 // delivered: used up
	require.NoError(t, e.g.Wake(context.Background()))
	require.GreaterOrEqual(t, begins, 3, "the reopening opened three transactions before its sweep")
	reopening = false
	require.Equal(t, runtime.PhaseServe, e.g.Phase())
	require.GreaterOrEqual(t, e.s.wake, e.s.now+1000, "the failed sweep's retry, on the wake schedule")

	release()
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "after the reopening", "id": "p2"})
	require.Equal(t, 202, r.status, "the reopened instance takes writes at once: %s", r.body.String())
	require.Contains(t, logged.String(), "list the sessions to watch", "the listing's refusal is logged")
	require.NotNil(t, e.snapshot().Claim, "the stopped turn keeps its claim")
	deltas := len(e.s.emitted("session.text.delta@1"))
	e.deliverWakes(5, 10*60_000)
	snap := e.snapshot()
	require.Equal(t, "idle", snap.Status, "%+v", snap)
	require.Equal(t, map[string]int{"session.execution.succeeded@1": 2}, e.terminals(), "the stopped turn went on, then the new prompt ran")
	require.Equal(t, 1, e.count("session.execution.resumed@1"), "the turn was resumed once")
	require.Greater(t, len(e.s.emitted("session.text.delta@1")), deltas, "the resumed turn's deltas are emitted")
}
