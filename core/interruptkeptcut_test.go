package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An execution whose own cut of a step storage refused, and which is then
// stuck past the interrupt's grace period: the interrupt's direct commit
// cuts the step with the text that refused cut held (everything the step
// received), not only the shorter checkpoint (Execution.keptCuts).
func TestDirectInterruptWritesTheStuckExecutionsRefusedCut(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	const stepID = "step-kept"
	refused, release, returned := make(chan error, 1), make(chan struct{}), make(chan struct{})
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		defer close(returned)
		if _, err := x.Append(ctx, true,
			core.NewEvent{Type: event.StepStarted, Payload: event.StepBegun{StepID: stepID, ExecutionID: x.ID(), PromptID: x.PromptID(), Index: 1}},
			core.NewEvent{Type: event.TextCheckpoint, Payload: event.Checkpoint{StepID: stepID, Text: "alpha "}}); err != nil {
			refused <- err
			return core.Outcome{Kind: core.Stopped}
		}
		f.FailFor(time.Hour, faultvfs.Full)
		_, err := x.Append(ctx, false, core.NewEvent{Type: event.StepCut, Payload: event.Cut{StepID: stepID, Text: "alpha beta ", Reason: event.CutStopped}})
		refused <- err
		<-release // a body that ignores its cancellation
		return core.Outcome{Kind: core.Stopped}
	}))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "stream")
	var err error
	tr.Drive(func() { err = <-refused })
	require.ErrorIs(t, err, core.ErrStorageUnavailable, "storage refused the execution's own cut")
	f.Heal()

	closed := make(chan struct{})
	close(closed)
	require.NoError(t, interruptPastGrace(t, tr, n, sid, closed), "committed directly past the grace period")
	close(release)
	<-returned
	require.Equal(t, "interrupted", tr.PromptState(pid))

	cuts := treetest.OfType(tr.Events(sid), event.StepCut)
	require.Len(t, cuts, 1)
	var c event.Cut
	require.NoError(t, cuts[0].Decode(&c))
	assert.Equal(t, "alpha beta ", c.Text, "the refused cut's text, not the checkpoint's")
	assert.Equal(t, event.CutStopped, c.Reason)
}
