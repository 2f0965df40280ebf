package recovery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A scheduled retry, once started, is an execution like any other: killed
// inside it, the next boot resumes it and counts the resume, and kills
// past the budget abort the turn. The claim's retry sleep must end when
// the retry starts; a claim still naming the due retry would have every
// boot start the retry afresh, uncounted, and a turn whose retried
// execution kills its server would never end.
func TestAKilledRetryResumesOnTheBudget(t *testing.T) {
	tr := treetest.New(t)
	const budget = 3
	tr.Cfg = tr.Cfg.WithResumeBudget(budget)
	var runs atomic.Int32
	started := make(chan *core.Execution, budget+4)
	d := core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		if runs.Add(1) == 1 {
			return core.Outcome{Kind: core.RetryLater, RetryAt: x.Clock().Now() + time.Second.Milliseconds(), Attempt: 1, Message: "rate limited"}
		}
		started <- x
		<-ctx.Done() // killed with its server
		return core.Outcome{Kind: core.Stopped}
	})
	n := tr.Boot(d)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "go")
	n.Idle()
	require.Len(t, treetest.OfType(tr.Events(sid), event.RetryScheduled), 1, "the turn sleeps on its retry")
	n.Crash()

	tr.Clock.Advance(time.Second)
	n = tr.Boot(d)
	x := <-started
	require.Len(t, startsOf(t, tr.Events(sid), event.CauseRetry), 1, "the boot started the due retry")
	assert.Equal(t, 0, x.Attempt())
	n.Crash()

	for attempt := 1; attempt <= budget; attempt++ {
		n = tr.Boot(d)
		x = <-started
		require.Equal(t, attempt, x.Attempt(), "a killed retry is resumed and counted")
		n.Crash()
	}
	n = tr.Boot(d)
	n.Idle()
	assert.Equal(t, "failed", tr.PromptState(pid), "kills past the budget abort the turn")
	evs := tr.Events(sid)
	assert.Len(t, startsOf(t, evs, event.CauseRetry), 1, "the retry started once")
	assert.Len(t, treetest.OfType(evs, event.ExecutionResumed), budget+1)
	fails := treetest.OfType(evs, event.ExecutionFailed)
	require.Len(t, fails, 1)
	var failed event.Failed
	require.NoError(t, fails[0].Decode(&failed))
	assert.Equal(t, event.FailAborted, failed.Type)
	assert.False(t, tr.Claim(sid).Exists)
}
