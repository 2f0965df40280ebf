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

// A turn that ends succeeded while the instance is stopping (Close), with
// a prompt queued behind it, does not start that prompt here, and must keep
// the claim for it (DESIGN §6: an open prompt always has a claim). The next
// boot on the same tree then starts the queued turn as a fresh start (cause
// "prompt", no resume counted). The hook holds finish after it read that
// the execution ended succeeded (no cancel cause yet) until Close has
// cancelled it, so the end is recorded with startNext=false.
func TestTurnEndingWhileClosingKeepsClaimForQueuedPrompt(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	closed := make(chan error, 1)
	var inst *core.Instance
	defer core.SetFinishingHook(func(x *core.Execution) {
		if x.Prompt() != "hold first" {
			return
		}
		go func() { closed <- inst.Close(context.Background()) }()
		<-x.Cancelled() // Close has marked the instance closed
	})()
	n := tr.Boot(d)
	inst = n.Inst
	sid := n.NewSession("s")
	first := n.Admit(sid, "hold first")
	x := <-d.Started
	require.Equal(t, "hold first", x.Prompt())
	second := n.Admit(sid, "second") // queued behind the first
	d.Release()

	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("Close never returned")
	}
	assert.Equal(t, "succeeded", tr.PromptState(first), "the first turn's end was recorded")
	require.Equal(t, "queued", tr.PromptState(second), "a stopping instance starts nothing")
	c := tr.Claim(sid)
	require.True(t, c.Exists, "the queued prompt keeps the claim")
	assert.Empty(t, c.ExecutionID, "held afresh, without an execution")
	assert.Zero(t, c.Attempts)
	assert.Len(t, d.Started, 0, "the queued turn did not start on the stopping instance")

	// The next boot on the same tree starts the queued turn, as a start.
	n2 := tr.Boot(d)
	var x2 *core.Execution
	select {
	case x2 = <-d.Started:
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("the queued prompt never ran after the reboot")
	}
	assert.Equal(t, "second", x2.Prompt())
	assert.Equal(t, event.CausePrompt, x2.Cause(), "a start, not a resume")
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(second))
	assert.Empty(t, treetest.OfType(tr.Events(sid), event.ExecutionResumed), "no resume was counted")
	assert.False(t, tr.Claim(sid).Exists)
}
