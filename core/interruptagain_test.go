package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A client's interrupt of a child that meets the child's task execution
// still finishing after its parent's interrupt (simulator seed 41): the
// execution ends with the task turn interrupted and starts the prompt the
// client sent the child before this interrupt. That prompt is the
// interrupt's to stop; the interrupted task turn alone does not answer it.
func TestInterruptLooksPastAnEarlierInterruptsEnd(t *testing.T) {
	tr := treetest.New(t)
	r := offlineTaskRunner(t, tr)

	type answer struct {
		did bool
		err error
	}
	clientDone := make(chan answer, 1)
	ictx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only to fail instead of hanging
	defer cancel()
	var (
		mu     sync.Mutex
		own    string // the child's own prompt, once admitted
		fired  bool
		hookOn bool
	)
	n := tr.Boot(r)
	inst := n.Inst
	defer core.SetFinishingHook(n.Inst, func(x *core.Execution) {
		mu.Lock()
		defer mu.Unlock()
		if !hookOn || fired || x.SessionID() != "root.1" || x.PromptID() == own {
			return
		}
		fired = true
		// The child's task execution was cancelled by its parent's
		// interrupt and has not recorded its end: the client's interrupt
		// finds it running, and waits for it (its grace timer is set).
		pending := tr.Clock.Pending()
		go func() {
			did, err := inst.Interrupt(ictx, "root.1", event.ReasonUser)
			clientDone <- answer{did, err}
		}()
		tr.Clock.BlockUntil(pending + 1)
	})()

	n.NewSession("root")
	n.Admit("root", "/task /sleep 1h")
	tr.Clock.BlockUntil(3) // the child sleeps in its task turn: wall, idle and sleep timers
	require.True(t, n.Inst.RunningHere("root.1"))
	ownID := n.Admit("root.1", "/sleep 1h") // queued behind the task turn
	mu.Lock()
	own, hookOn = ownID, true
	mu.Unlock()

	did, err := n.Inst.Interrupt(ictx, "root", event.ReasonUser) // the parent's
	require.NoError(t, err)
	require.True(t, did)

	var a answer
	select {
	case a = <-clientDone:
	case <-ictx.Done():
		t.Fatal("the client's interrupt of the child never returned (or never started: the finishing hook did not fire)")
	}
	require.NoError(t, a.err)
	assert.True(t, a.did)
	require.Equal(t, "interrupted", tr.PromptState(ownID),
		"the child's own prompt, admitted before the client's interrupt, is stopped by it")
	require.False(t, n.Inst.RunningHere("root.1"), "nothing runs on the child after its interrupt answered")
	n.Idle()
}
