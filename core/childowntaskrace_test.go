package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A parent's interrupt that lands while the child's task turn is ending
// (answered, its end not yet recorded) stops nothing of the child's own:
// the prompt a client sent the child, which that end starts next, runs on
// (interruptTask names the task prompt it may stop).
func TestParentInterruptSparesChildsOwnNextTurn(t *testing.T) {
	tr := treetest.New(t)
	r := offlineTaskRunner(t, tr)
	var own string
	done := make(chan error, 1)
	ictx, cancel := context.WithCancel(context.Background())
	defer cancel() // frees the parent's interrupt if the test failed while it hung
	n := tr.Boot(r)
	inst := n.Inst
	defer core.SetFinishingHook(n.Inst, func(x *core.Execution) {
		if x.SessionID() != "root.1" || x.PromptID() == own {
			return
		}
		a, err := inst.Admit(context.Background(), "root.1", core.PromptInput{Text: "/sleep 1h"})
		require.NoError(t, err)
		own = a.PromptID
		go func() {
			_, err := inst.Interrupt(ictx, "root", event.ReasonUser)
			done <- err
		}()
		<-x.Cancelled()
	})()
	n.NewSession("root")
	n.Admit("root", "/task hi")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("the parent's interrupt never returned: it waits for the child's task execution, which never finished")
	}
	assert.Equal(t, "running", tr.PromptState(own), "the child's own prompt runs on")
	assert.True(t, n.Inst.RunningHere("root.1"))
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second) // only to fail instead of hanging
	defer ocancel()
	did, err := n.Inst.Interrupt(octx, "root.1", event.ReasonUser) // the client's own interrupt
	require.NoError(t, err, "the client's own interrupt of the child")
	require.True(t, did)
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(own))
}

// A parent's interrupt whose child's task turn ignores the cancel (a tool
// body that does) ends that turn directly once the grace period is up; the
// prompt a client sent the child, queued behind it, then holds the claim
// and starts at once, not at the next wake-up.
func TestParentInterruptPastGraceStartsChildsOwnPrompt(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	root, child, cx := startChildTask(t, n, d, "stubborn task") // deaf to cancels
	own := n.Admit(child.ID, "hold mine")

	done := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ctx, root, event.ReasonUser)
		done <- err
	}()
	// The parent's turn ended; its interrupt stops the child's task turn.
	within(t, cx.Cancelled(), "the parent's interrupt to cancel the child's task turn")
	timer := make(chan struct{})
	go func() {
		tr.Clock.BlockUntil(1)
		close(timer)
	}()
	within(t, timer, "the interrupt's grace timer")
	tr.Clock.Advance(core.DefaultInterruptGrace)
	require.NoError(t, within(t, done, "the parent's interrupt to return"))
	assert.Equal(t, "interrupted", tr.PromptState(child.PromptID), "the task turn ended past the grace")
	assert.Equal(t, "running", tr.PromptState(own), "the child's own prompt started with the interrupt, not at a wake-up")
	assert.True(t, n.Inst.RunningHere(child.ID))
	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(own))
}

// within receives from ch, waiting at most 30 s of real time only to fail
// instead of hanging: what names the awaited step in the failure.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	v, ok := received(t, ch, what)
	if !ok {
		t.FailNow()
	}
	return v
}

// received is within for a goroutine other than the test's (a hook core
// calls), where t.FailNow must not be called: it marks the test failed and
// reports false, and the caller returns, so that the code it runs in goes
// on and the test ends rather than hangs.
func received[T any](t *testing.T, ch <-chan T, what string) (T, bool) {
	t.Helper()
	select {
	case v := <-ch:
		return v, true
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Errorf("timed out waiting for %s", what)
	}
	var zero T
	return zero, false
}
