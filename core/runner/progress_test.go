package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// resumedAfterProgress runs a turn until it reaches a point, kills its
// instance there, boots the next (whose sweep counts resume 1) and waits
// until the resumed turn reaches the next point; it returns the tree and
// the running node. The model answers the turn's n-th request (across
// instances) with answer(n, reached); the "hold" tool (not idempotent)
// sends on reached when its body starts and runs until its instance dies.
func resumedAfterProgress(t *testing.T, answer func(n int64, reached chan<- struct{}) scriptStep) (*treetest.Tree, *treetest.Node) {
	tr := treetest.New(t)
	reached := make(chan struct{}, 8)
	var requests atomic.Int64
	m := &scriptModel{steps: func(int) scriptStep { return answer(requests.Add(1), reached) }}
	hold := tool.Func{DefaultPermission: "allow", Name: "hold", Run: func(ctx context.Context, _ tool.Call) (string, error) {
		reached <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	}}
	newTurnRunner := func() *runner.Runner { return newRunner(t, m, runner.NewConfig(), hold, tool.KVPut()) }
	n := tr.Boot(newTurnRunner())
	n.NewSession("s")
	n.Admit("s", "go")
	awaitSignal(t, reached, "the first instance to get where it dies")
	n.Crash()
	n = tr.Boot(newTurnRunner())
	t.Cleanup(n.Crash)
	awaitSignal(t, reached, "the resumed turn to get where the test looks")
	require.Len(t, treetest.OfType(tr.Events("s"), event.ExecutionResumed), 1, "the turn was resumed once")
	return tr, n
}

// A model stream recorded complete is progress (DESIGN §6.6): its commit
// resets the resume count, so a resumed turn whose step completed is back
// at 0 while the step's tool runs.
func TestCompletedStreamResetsTheResumeCount(t *testing.T) {
	tr, _ := resumedAfterProgress(t, func(n int64, reached chan<- struct{}) scriptStep {
		if n == 1 { // the first instance dies while this step streams
			reached <- struct{}{}
			return scriptStep{stall: true}
		}
		return scriptStep{chunks: toolCall("hold", `{}`)}
	})
	assert.Zero(t, tr.Claim("s").Attempts, "the completed stream reset the resume count")
}

// A tool that runs in the tree's transaction (kv_put) returned: its
// settlement is progress and resets the resume count in the same commit,
// so a resumed turn that only settled calls (its step completed before
// the kill) asks the model next at 0.
func TestInTreeSettlementResetsTheResumeCount(t *testing.T) {
	tr, _ := resumedAfterProgress(t, func(n int64, reached chan<- struct{}) scriptStep {
		if n == 1 { // the first instance dies in hold; kv_put waits behind it, called
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, Name: "hold", Arguments: `{}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, Name: "kv_put", Arguments: `{"key":"k","value":"v"}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		// The resumed turn settled hold as unknown (not progress), then ran kv_put.
		reached <- struct{}{}
		return scriptStep{stall: true}
	})
	assert.Zero(t, tr.Claim("s").Attempts, "kv_put's settlement reset the resume count")
}

// awaitSignal receives from ch, waiting at most 30 s of real time only to
// fail instead of hanging; what names the awaited step.
func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatalf("timed out waiting for %s", what)
	}
}
