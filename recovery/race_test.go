package recovery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
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
