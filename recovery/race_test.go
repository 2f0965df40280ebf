package recovery_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// effectDriver writes a durable "body started" marker through the fence
// before each side effect and records the effect in a ledger, the way a tool
// writes `executing` before its body runs.
type effectDriver struct {
	mu     sync.Mutex
	ledger map[string]int // execution id → effects
}

func (d *effectDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	if _, err := x.Append(ctx, false, core.NewEvent{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: x.ID(), What: "body.started"}}); err != nil {
		return core.Outcome{Kind: core.Stopped}
	}
	d.mu.Lock()
	d.ledger[x.ID()]++
	d.mu.Unlock()
	return treetest.Answer(ctx, x)
}

// 13. An interrupt racing an execution start yields exactly one outcome, and
// no body starts after the interrupt commits.
func TestInterruptRacingStartHasOneOutcome(t *testing.T) {
	tr := treetest.New(t)
	d := &effectDriver{ledger: map[string]int{}}
	n := tr.Boot(d)
	const rounds = 40
	for i := range rounds {
		sid := n.NewSession(fmt.Sprintf("s%d", i))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: "go"})
			assert.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
			assert.NoError(t, err)
		}()
		wg.Wait()
	}
	n.Idle()
	for i := range rounds {
		sid := fmt.Sprintf("s%d", i)
		evs := tr.Events(sid)
		outcomes := len(treetest.Terminals(evs)) + len(treetest.OfType(evs, event.PromptCancelled))
		require.Equal(t, 1, outcomes, "session %s: %v", sid, evs)
		assert.False(t, tr.Claim(sid).Exists)

		// Nothing follows an interrupt: no marker, no answer, no terminal.
		for i, e := range evs {
			if e.Type == event.ExecutionInterrupted {
				assert.Len(t, evs, i+1, "session %s: events after the interrupt committed", sid)
			}
		}
		// Every effect in the ledger had its fenced marker committed first.
		effects := 0
		for _, e := range treetest.OfType(evs, event.ExecutionStarted) {
			var s event.Started
			require.NoError(t, e.Decode(&s))
			effects += d.ledger[s.ExecutionID]
		}
		assert.Equal(t, len(treetest.OfType(evs, event.Progress)), effects, "session %s", sid)
	}
}

// The sweep decides on the claim as it is when Recover holds the claim
// lock, not as Claims listed it: between the two the claim can change.
// Here the listed claim names no execution (its admission committed, its
// start did not); while the sweep's write waits out a storage failure (the
// claim lock let go), another sweep starts an execution on it and that
// execution dies without a terminal. The first sweep must then count a
// resume against the budget (Resume, attempt 1), not start the turn afresh
// as the listed claim would say.
func TestSweepDecidesOnTheCurrentClaimNotTheListedOne(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	n := tr.Boot(treetest.NewDriver(4))
	sid := n.NewSession("s")
	n.Kill.KillAt(2, false) // the admission commits; its turn's start does not
	n.Admit(sid, "go")
	<-n.Kill.Died()
	n.Crash()
	require.True(t, tr.Claim(sid).Exists)
	require.Empty(t, tr.Claim(sid).ExecutionID, "the claim names no execution")

	var runs atomic.Int32
	d := core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		if runs.Add(1) == 1 {
			return core.Outcome{Kind: core.Stopped} // dies, leaving the claim
		}
		return treetest.Answer(ctx, x)
	})
	host, _, kdb := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, d) // not swept yet
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })

	f.FailNext(1, faultvfs.Full) // the sweep's first write: Claims has listed the claim
	var rep recovery.Report
	var sweepErr error
	var between bool
	tr.DriveEach(func() {
		rep, sweepErr = recovery.Sweep(ctx, inst)
	}, func(w retry.Wait) {
		if between {
			return
		}
		between = true
		// The sweep waits with the claim lock let go: another sweep starts
		// the turn here, and its execution dies.
		other, err := recovery.Sweep(ctx, inst)
		require.NoError(t, err)
		require.Equal(t, 1, other.Count(core.Start))
		require.NoError(t, inst.WaitIdle(ctx))
		require.Equal(t, int32(1), runs.Load())
		c := tr.Claim(sid)
		require.NotEmpty(t, c.ExecutionID, "the claim now names the dead execution")
		require.Equal(t, 0, c.Attempts)
	})
	require.NoError(t, sweepErr)
	require.True(t, between, "the sweep waited for storage after listing the claim")
	require.Len(t, rep.Decisions, 1)
	assert.Equal(t, core.Resume, rep.Decisions[0].Action, "decided on the claim with the dead execution")
	assert.Equal(t, 1, rep.Decisions[0].Attempt)
	require.NoError(t, inst.WaitIdle(ctx))
	evs := tr.Events(sid)
	resumed := treetest.OfType(evs, event.ExecutionResumed)
	require.Len(t, resumed, 1, "the resume is counted against the budget")
	var r event.Resumed
	require.NoError(t, resumed[0].Decode(&r))
	assert.Equal(t, 1, r.Attempt)
	assert.Len(t, treetest.Terminals(evs), 1)
	assert.Equal(t, int32(2), runs.Load())
}
