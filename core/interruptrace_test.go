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

// endingDriver answers the prompt "first" once released, and holds any
// other prompt until its execution is cancelled.
type endingDriver struct {
	release chan struct{}
	started chan *core.Execution
}

func (d *endingDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.started <- x
	if x.Prompt() == "first" {
		<-d.release
		return treetest.Answer(ctx, x)
	}
	<-ctx.Done()
	return core.Outcome{Kind: core.Stopped}
}

// An interrupt that lands while a turn is ending (its answer done, its
// end not yet recorded) finds that turn recorded succeeded, not
// interrupted: it must then stop what the session runs next (the queued
// prompt the end started), not answer "interrupted" while that runs on.
// The hook holds finish where it has read the execution's end and not yet
// taken the claim lock, until the interrupt has cancelled it.
func TestInterruptAsATurnEndsStopsWhatRunsNext(t *testing.T) {
	tr := treetest.New(t)
	d := &endingDriver{release: make(chan struct{}), started: make(chan *core.Execution, 4)}
	type result struct {
		did bool
		err error
	}
	interrupted := make(chan result, 1)
	var sid string
	n := tr.Boot(d)
	inst := n.Inst
	defer core.SetFinishingHook(n.Inst, func(x *core.Execution) {
		if x.Prompt() != "first" {
			return
		}
		go func() {
			did, err := inst.Interrupt(context.Background(), sid, event.ReasonUser)
			interrupted <- result{did, err}
		}()
		<-x.Cancelled()
	})()
	sid = n.NewSession("s")
	first := n.Admit(sid, "first")
	<-d.started
	second := n.Admit(sid, "second") // queued behind the first
	close(d.release)

	var r result
	select {
	case r = <-interrupted:
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		t.Fatal("the interrupt never answered")
	}
	require.NoError(t, r.err)
	assert.True(t, r.did)
	// When the interrupt answers, what it stopped is recorded.
	assert.Equal(t, "succeeded", tr.PromptState(first), "the first turn ended before the interrupt took")
	require.Equal(t, "interrupted", tr.PromptState(second), "the interrupt stopped what ran next")
	n.Idle()
	assert.False(t, tr.Claim(sid).Exists)
}
