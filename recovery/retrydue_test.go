package recovery_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// A recovery whose transaction waits for storage (another connection holds
// the write lock, as a zombie instance's would) while the scheduled retry it
// finds comes due must not start that retry: the write's events carry the
// time it began (DESIGN §5), so its execution.started would be dated before
// the retry was due (the simulator's retry-not-early, seed 5267). It sleeps
// instead, and the next sweep starts the retry with a fresh timestamp.
func TestARetryDueDuringARecoverysWaitStartsAtTheNextSweep(t *testing.T) {
	tr := treetest.New(t)
	tr.DB.BusyTimeout = 20 * time.Millisecond
	var runs atomic.Int32
	var retryAt atomic.Int64
	started := make(chan *core.Execution, 4)
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		defer func() { started <- x }()
		if runs.Add(1) == 1 {
			// Due a moment later: sooner than the first wait for storage ends.
			retryAt.Store(x.Clock().Now() + 1)
			return core.Outcome{Kind: core.RetryLater, RetryAt: retryAt.Load(), Attempt: 1, Message: "rate limited"}
		}
		return core.Outcome{Kind: core.Succeeded}
	}))
	sid := n.NewSession("s")
	n.Admit(sid, "go")
	<-started
	n.Idle()

	release := tr.HoldWriteLock()
	var d core.Decision
	var err error
	waits := tr.DriveEach(func() { d, err = n.Inst.Recover(ctx, sid, recovery.PolicyOf(n.Inst).Decide) }, func(retry.Wait) { release() })
	require.NoError(t, err)
	require.NotEmpty(t, waits, "the recovery waited for the write lock")
	require.Greater(t, tr.Clock.Now(), retryAt.Load(), "the retry came due during the wait")
	assert.Equal(t, core.Sleep, d.Action, "judged at the write's time, the retry was not due")
	assert.Equal(t, retryAt.Load(), d.At)
	assert.Empty(t, startsOf(t, tr.Events(sid), event.CauseRetry), "no retry started by the waiting recovery")

	rep, err := recovery.Sweep(ctx, n.Inst)
	require.NoError(t, err)
	require.Len(t, rep.Decisions, 1)
	assert.Equal(t, core.Start, rep.Decisions[0].Action)
	<-started
	n.Idle()
	retries := startsOf(t, tr.Events(sid), event.CauseRetry)
	require.Len(t, retries, 1)
	assert.GreaterOrEqual(t, retries[0].At, retryAt.Load(), "the retry's execution is dated once it was due")
}

// startsOf returns the execution.started events of evs with the cause.
func startsOf(t *testing.T, evs []event.Event, cause string) []event.Event {
	t.Helper()
	var out []event.Event
	for _, e := range treetest.OfType(evs, event.ExecutionStarted) {
		var s event.Started
		require.NoError(t, e.Decode(&s))
		if s.Cause == cause {
			out = append(out, e)
		}
	}
	return out
}

// The sweep around such a recovery starts the retry itself, with a write
// of its own dated once the retry is due. Left asleep, the retry is due
// with the sweep over and its storage taking writes again, and the wake
// handler's re-arm, which counts a due retry as one the sweep could not
// start (its storage failing: TestRearmNeverArmsADueRetryInThePast),
// arms one wake interval ahead of it (the simulator's wake-before-due,
// judged on a sweep's last arm). Here a zombie's write lock is taken
// after the sweep listed the claims, as its first recovery arms the
// wake-up for another session's retry an hour away.
func TestASweepWhoseRecoveryWaitedPastARetryStartsIt(t *testing.T) {
	// The retry is due a moment after the recovery's write began, sooner
	// than its first wait for storage ends, or exactly as that wait ends
	// (retry.WriteInitial): due then as well.
	for _, tc := range []struct {
		name  string
		after int64 // ms from the first run to its retry
	}{{"during-the-wait", 1}, {"as-the-wait-ends", retry.WriteInitial.Milliseconds()}} {
		t.Run(tc.name, func(t *testing.T) { sweepWaitingPastARetry(t, tc.after) })
	}
}

func sweepWaitingPastARetry(t *testing.T, after int64) {
	tr := treetest.New(t)
	tr.DB.BusyTimeout = 20 * time.Millisecond
	var retryAt atomic.Int64
	var runs sync.Map
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		if _, again := runs.LoadOrStore(x.SessionID(), true); again {
			return core.Outcome{Kind: core.Succeeded}
		}
		at := x.Clock().Now() + time.Hour.Milliseconds()
		if x.SessionID() == "s" {
			at = x.Clock().Now() + after
			retryAt.Store(at)
		}
		return core.Outcome{Kind: core.RetryLater, RetryAt: at, Attempt: 1, Message: "rate limited"}
	}))
	for _, sid := range []string{"a", "s"} { // a's claim is older: swept first
		n.NewSession(sid)
		n.Admit(sid, "go")
		n.Idle()
	}

	var release func()
	var held sync.Once
	tr.Wake.OnArm(func(int64) { held.Do(func() { release = tr.HoldWriteLock() }) })
	var rep recovery.Report
	var err error
	waits := tr.DriveEach(func() { rep, err = recovery.Sweep(ctx, n.Inst) }, func(retry.Wait) { release() })
	tr.Wake.OnArm(nil)
	require.NoError(t, err)
	require.NotEmpty(t, waits, "the recovery of s waited for the write lock")
	require.GreaterOrEqual(t, tr.Clock.Now(), retryAt.Load(), "s's retry came due during the wait")
	require.Len(t, rep.Decisions, 2)
	assert.Equal(t, core.Sleep, rep.Decisions[0].Action, "a sleeps on its retry an hour away")
	assert.Equal(t, "s", rep.Decisions[1].SessionID)
	assert.Equal(t, core.Start, rep.Decisions[1].Action, "the sweep started s's retry, due by its end")
	n.Idle()
	retries := startsOf(t, tr.Events("s"), event.CauseRetry)
	require.Len(t, retries, 1)
	assert.GreaterOrEqual(t, retries[0].At, retryAt.Load(), "the retry's execution is dated once it was due")
}
