package runner_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An interrupt that arrives right after a call's `executing` commit is
// answered only after the tool body, if it started at all, has stopped: no
// body runs after the interrupt is committed (DESIGN §6.4). A body that
// starts with no executing record (nothing would start the interrupt)
// fails the test at once instead of hanging it.
func TestNoToolBodyRunsAfterInterruptCommits(t *testing.T) {
	tr := treetest.New(t)
	var interruptDone atomic.Bool
	var ranAfter atomic.Bool
	var started atomic.Int32
	var recorded atomic.Bool // the call's executing record was committed
	unrecorded := make(chan struct{})
	var unrecordedOnce sync.Once
	act := tool.Func{DefaultPermission: "allow", Name: "act", Run: func(ctx context.Context, c tool.Call) (string, error) {
		started.Add(1)
		if !recorded.Load() {
			unrecordedOnce.Do(func() { close(unrecorded) })
			return "unrecorded", nil
		}
		<-ctx.Done() // a body that honours cancellation, slowly
		if interruptDone.Load() {
			ranAfter.Store(true)
		}
		return "stopped", ctx.Err()
	}}
	var once sync.Once
	var n *treetest.Node
	answered := make(chan struct{})
	tr.Cfg = tr.Cfg.WithCommitHook(func(_ storage.Tx, ev event.Event) error {
		if ev.Type == event.ToolExecuting {
			recorded.Store(true)
			once.Do(func() {
				go func() {
					_, err := n.Inst.Interrupt(context.Background(), "s", event.ReasonUser)
					assert.NoError(t, err)
					interruptDone.Store(true)
					close(answered)
				}()
			})
		}
		return nil
	})
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: toolCall("act", `{}`)} }}
	n = tr.Boot(newRunner(t, m, runner.NewConfig(), act))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "act now")
	select {
	case <-answered:
	case <-unrecorded:
		require.FailNow(t, "the non-idempotent body ran without its executing record")
	}
	n.Idle()
	assert.False(t, ranAfter.Load(), "the body ran on after the interrupt was answered")
	assert.LessOrEqual(t, started.Load(), int32(1))
	require.Equal(t, "interrupted", tr.PromptState(pid))
	evs := tr.Events(sid)
	assert.Equal(t, event.ExecutionInterrupted, evs[len(evs)-1].Type, "nothing after the interrupt")
}

// Stricter than the test above: once the execution is cancelled, no tool
// body starts at all, even one whose executing record has committed. The
// interrupt here cancels the execution right after that commit, before
// the body would start; a body that ignored its context would otherwise
// act after the user's interrupt.
func TestNoToolBodyStartsOnceCancelled(t *testing.T) {
	tr := treetest.New(t)
	var started atomic.Int32
	act := tool.Func{DefaultPermission: "allow", Name: "act", Run: func(ctx context.Context, c tool.Call) (string, error) {
		started.Add(1)
		return "acted", nil // deaf to its context, as a careless body is
	}}
	var once sync.Once
	var n *treetest.Node
	answered := make(chan struct{})
	tr.Cfg = tr.Cfg.WithCommitHook(func(_ storage.Tx, ev event.Event) error {
		if ev.Type == event.ToolExecuting {
			once.Do(func() {
				pending := tr.Clock.Pending()
				go func() {
					_, err := n.Inst.Interrupt(context.Background(), "s", event.ReasonUser)
					assert.NoError(t, err)
					close(answered)
				}()
				tr.Clock.BlockUntil(pending + 1) // the interrupt cancelled the execution and set its grace timer
			})
		}
		return nil
	})
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: toolCall("act", `{}`)} }}
	n = tr.Boot(newRunner(t, m, runner.NewConfig(), act))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "act now")
	<-answered
	n.Idle()
	assert.Zero(t, started.Load(), "a tool body started after its execution was cancelled")
	require.Equal(t, "interrupted", tr.PromptState(pid))
}
