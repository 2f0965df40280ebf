package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A tool body that returns after an interrupt cancelled it has a known
// result, and its settlement waits out a storage outage like any write:
// the interrupt's cancellation does not cut that wait short, or the call
// would stay executing and read as "no result" (its effect unknown) to
// the next turn. The settlement's counterpart of
// TestInterruptDuringOutageKeepsTheTextReceived.
func TestInterruptDuringOutageKeepsTheToolResult(t *testing.T) {
	tr := treetest.New(t)
	fault := tr.Faults()
	started, full := make(chan struct{}), make(chan struct{})
	send := tool.Func{DefaultPermission: "allow", Name: "send", Run: func(ctx context.Context, _ tool.Call) (string, error) {
		close(started)
		<-ctx.Done()
		// Shorter than the interrupt's grace: past it the interrupt commits
		// itself, and its fence refuses the settlement, as it may.
		fault.FailFor(time.Second, faultvfs.Full)
		close(full)
		return "sent anyway", nil // a body that finished its effect despite the cancel
	}}
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "c0", Name: "send", Arguments: `{}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("ok")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), send))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "send")
	<-started
	interrupted := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		interrupted <- err
	}()
	<-full
	n.IdleDriving()
	if err := <-interrupted; err != nil {
		require.ErrorIs(t, err, core.ErrStorageUnavailable)
	}

	assert.Equal(t, "interrupted", tr.PromptState(pid))
	settled := treetest.OfType(tr.Events(sid), event.ToolSettled)
	require.Len(t, settled, 1, "the call settled with its result")
	var s event.Settled
	require.NoError(t, settled[0].Decode(&s))
	assert.Equal(t, "sent anyway", s.Output)
	assert.True(t, s.Ran)
}
