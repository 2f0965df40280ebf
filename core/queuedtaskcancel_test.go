package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// spawnAndDie is a driver whose turn starts one child and is killed right
// after the child's commit: the child holds its claim and its task prompt,
// still queued; its turn never starts (the test checks it).
type spawnAndDie struct {
	kill       func()
	background bool
}

func (d spawnAndDie) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.kill()
	_, _ = x.StartChild(ctx, core.ChildSpec{CallID: "call_task", Prompt: "look around", Background: d.background, MaxDepth: core.DefaultTaskDepth, MaxChildren: core.DefaultMaxSubagents})
	return core.Outcome{Kind: core.Stopped}
}

// childStartCut runs a root turn that starts one child, the instance
// killed right after the child's commit (spawnAndDie), and returns the
// tree and the child's task prompt: queued, with the child's claim, no
// sweep run yet.
func childStartCut(t *testing.T, background bool) (*treetest.Tree, string) {
	t.Helper()
	tr := treetest.New(t)
	var n *treetest.Node
	n = tr.Boot(spawnAndDie{kill: func() { n.Kill.KillAt(1, true) }, background: background})
	n.NewSession("root")
	n.Admit("root", "start a child")
	<-n.Kill.Died()
	n.Crash()
	require.True(t, tr.Claim("root.1").Exists, "the child's claim")
	task := taskPromptID(t, tr, "root.1")
	require.Equal(t, "queued", tr.PromptState(task), "the task prompt never started")
	return tr, task
}

// A child whose task prompt still waits in its queue (its start was cut
// by a kill, and no sweep has run yet) is interrupted by its user. The
// interrupt cancels the task prompt, which ends no turn, so before, the
// child's job stayed running for good: a foreground parent would wait on
// it forever and a background one never got its notice (the simulator's
// seeds 425 and 434: job-settled, background-notice-once). The job now
// ends with the cancel, in the same transaction, and the parent gets the
// notice a background child's end brings.
func TestCancelledQueuedTaskPromptEndsItsJob(t *testing.T) {
	for _, background := range []bool{true, false} {
		name := "foreground"
		if background {
			name = "background"
		}
		t.Run(name, func(t *testing.T) {
			tr, task := childStartCut(t, background)

			host, _, kdb := tr.Host()
			inst, err := core.Open(ctx, host, tr.Cfg, treetest.NewDriver(4)) // no sweep: the child's start is still owed
			require.NoError(t, err)
			t.Cleanup(func() { kdb.Kill(); inst.Abandon() })
			did, err := inst.Interrupt(ctx, "root.1", event.ReasonUser)
			require.NoError(t, err)
			require.True(t, did)

			assert.Equal(t, "cancelled", tr.PromptState(task))
			assert.False(t, tr.Claim("root.1").Exists)
			ended := treetest.OfType(tr.Events("root"), event.JobEnded)
			require.Len(t, ended, 1, "the child's job ended with its task prompt's cancel")
			var job event.Job
			require.NoError(t, ended[0].Decode(&job))
			assert.Equal(t, event.Job{ChildID: "root.1", CallID: "call_task", Background: background}, job)

			var notices []string
			for _, e := range treetest.OfType(tr.Events("root"), event.PromptAdmitted) {
				var a event.Admitted
				require.NoError(t, e.Decode(&a))
				if strings.HasPrefix(a.ClientID, "notice-") {
					notices = append(notices, a.Text)
				}
			}
			if background {
				assert.Equal(t, []string{"The background sub-agent root.1 finished (cancelled):\nThe sub-agent's turn ended cancelled."}, notices)
			} else {
				assert.Empty(t, notices, "a foreground child's end resolves its parent's call instead")
			}
		})
	}
}

// The same cancel, with the foreground parent already parked on its
// task call: the child's start failed after its commit (a full disk, here
// one failed transaction), so its task prompt waits in its queue with its
// claim while the parent's step parks with no claim of its own, and
// nothing but the child's turn end would ever resume it. The user's
// interrupt of the child must resolve the parent's waiting call and take
// its claim, so the parent's turn goes on to its end.
func TestCancelledQueuedTaskPromptResumesItsParkedParent(t *testing.T) {
	tr := treetest.New(t)
	var failed atomic.Bool
	tr.Cfg = tr.Cfg.WithCommitHook(func(_ storage.Tx, ev event.Event) error {
		if ev.SessionID == "root.1" && ev.Type == event.ExecutionStarted && failed.CompareAndSwap(false, true) {
			return errors.New("the child's start failed")
		}
		return nil
	})
	n := tr.Boot(offlineTaskRunner(t, tr))
	n.NewSession("root")
	parentPrompt := n.Admit("root", "/task look around")
	n.Idle()
	require.True(t, failed.Load(), "the child's start was tried and failed")
	task := taskPromptID(t, tr, "root.1")
	require.Equal(t, "queued", tr.PromptState(task), "the task prompt never started")
	require.True(t, tr.Claim("root.1").Exists, "the child's claim, left to a wake-up")
	require.False(t, tr.Claim("root").Exists, "the parent parked: no claim")
	waits, err := n.Inst.Blockers(ctx, "root", event.KindTask)
	require.NoError(t, err)
	require.Len(t, waits, 1, "the parent's call waits on its child")

	did, err := n.Inst.Interrupt(ctx, "root.1", event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	n.Idle()

	assert.Equal(t, "cancelled", tr.PromptState(task))
	assert.Len(t, treetest.OfType(tr.Events("root"), event.JobEnded), 1)
	resolved := treetest.OfType(tr.Events("root"), event.TaskResolved)
	require.Len(t, resolved, 1, "the parent's waiting call resolved")
	var settled []string
	for _, e := range treetest.OfType(tr.Events("root"), event.ToolSettled) {
		settled = append(settled, string(e.Data))
	}
	require.Len(t, settled, 1)
	assert.Contains(t, settled[0], "sub-agent root.1: The sub-agent's turn ended cancelled.")
	assert.Equal(t, "succeeded", tr.PromptState(parentPrompt), "the parent's turn went on to its end")
	assert.False(t, tr.Claim("root").Exists)
}

// The parent's own interrupt, with the foreground child's task prompt
// still queued (its start cut by a kill, no sweep yet): the job ends with
// the parent's turn, and the task prompt is cancelled as the user's, so
// the child never runs a turn no call waits for and its claim goes. The
// job ends once: cancelling the prompt finds it ended already.
func TestParentInterruptCancelsItsChildsQueuedTaskPrompt(t *testing.T) {
	tr, task := childStartCut(t, false)

	host, _, kdb := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, treetest.NewDriver(4)) // no sweep
	require.NoError(t, err)
	t.Cleanup(func() { kdb.Kill(); inst.Abandon() })
	did, err := inst.Interrupt(ctx, "root", event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	require.NoError(t, inst.WaitIdle(ctx))

	assert.Equal(t, "cancelled", tr.PromptState(task))
	assert.Equal(t, event.Cancelled{PromptID: task, Reason: event.ReasonUser}, onlyCancel(t, tr.Events("root.1")))
	assert.Empty(t, treetest.OfType(tr.Events("root.1"), event.ExecutionStarted), "the child ran no turn")
	assert.False(t, tr.Claim("root.1").Exists)
	assert.Len(t, treetest.OfType(tr.Events("root"), event.JobEnded), 1, "the job ended once")
}

// The same interrupt killed right after its commit, before it stopped the
// child: the next boot's sweep finds the child's claim with no live job
// and ends it as an orphan, its queued task prompt cancelled{orphaned}
// (the sweep cannot know why the job ended; docs/api.md), and the child
// runs no task turn. A prompt a client sent the child meanwhile, queued
// behind the task prompt, is the child's own: it keeps its place and runs
// (the claim is judged by its oldest prompt, the task's, not by this one).
func TestSweepCancelsAnOrphansQueuedTaskPrompt(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own prompt queued %v", own), func(t *testing.T) {
			tr, task := childStartCut(t, false)

			host, _, kdb := tr.Host()
			inst, err := core.Open(ctx, host, tr.Cfg, treetest.NewDriver(4)) // no sweep
			require.NoError(t, err)
			var ownID string
			if own {
				a, err := inst.Admit(ctx, "root.1", core.PromptInput{Text: "mine"})
				require.NoError(t, err)
				ownID = a.PromptID
			}
			kdb.KillAt(1, true) // dies with the interrupt's commit
			_, _ = inst.Interrupt(ctx, "root", event.ReasonUser)
			<-kdb.Died()
			inst.Abandon()
			require.Equal(t, "queued", tr.PromptState(task), "the interrupt's commit left the child to its descendants' stop")
			require.Len(t, treetest.OfType(tr.Events("root"), event.JobEnded), 1)

			third := tr.Boot(treetest.NewDriver(4))
			third.Idle()
			assert.Equal(t, "cancelled", tr.PromptState(task))
			assert.Equal(t, event.Cancelled{PromptID: task, Reason: event.ReasonOrphaned}, onlyCancel(t, tr.Events("root.1")))
			var started []string
			for _, e := range treetest.OfType(tr.Events("root.1"), event.ExecutionStarted) {
				var s event.Started
				require.NoError(t, e.Decode(&s))
				started = append(started, s.PromptID)
			}
			if own {
				assert.Equal(t, []string{ownID}, started, "only the child's own prompt ran")
				assert.Equal(t, "succeeded", tr.PromptState(ownID))
			} else {
				assert.Empty(t, started, "the child ran no turn")
			}
			assert.False(t, tr.Claim("root.1").Exists)
			assert.Len(t, treetest.OfType(tr.Events("root"), event.JobEnded), 1, "the job ended once")
		})
	}
}
