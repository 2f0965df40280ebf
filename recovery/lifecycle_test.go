package recovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

var ctx = context.Background()

// 1. A prompt answered 202 and then killed before its execution started runs
// after the next boot, with no attempt counted.
func TestPromptAdmittedThenKilledBeforeStartRunsAfterBootWithoutAttempt(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	// The admission is commit 1 from here; die just before commit 2, the
	// execution start. Admit still succeeds: its answer was already due.
	n.Kill.KillAt(2, false)
	pid := n.Admit(sid, "hello")
	<-n.Kill.Died()
	n.Crash()
	assert.Empty(t, treetest.OfType(tr.Events(sid), event.ExecutionStarted), "nothing started before the kill")
	require.True(t, tr.Claim(sid).Exists, "the claim was written with the admission")

	n2 := tr.Boot(d)
	assert.Equal(t, 1, n2.Report.Count(core.Start))
	n2.Idle()
	evs := tr.Events(sid)
	assert.Empty(t, treetest.OfType(evs, event.ExecutionResumed), "no attempt counted")
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.False(t, tr.Claim(sid).Exists)
	assert.Equal(t, 1, d.Runs())
}

// 2. The claim exists while an execution runs and survives a teardown with no
// shutdown hook.
func TestClaimHeldWhileRunningSurvivesTeardownWithoutShutdown(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	x := <-d.Started
	c := tr.Claim(sid)
	require.True(t, c.Exists)
	assert.Equal(t, x.ID(), c.ExecutionID, "the running execution is on the claim")

	n.Crash() // no Close: nothing recorded
	c = tr.Claim(sid)
	assert.True(t, c.Exists)
	assert.Equal(t, x.ID(), c.ExecutionID)
	assert.Empty(t, treetest.Terminals(tr.Events(sid)))
}

// A graceful stop records shutdown and keeps the claim, leaving the same
// claim state as a crash; the next boot resumes.
func TestShutdownKeepsClaimAndNextBootResumes(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hold")
	x := <-d.Started
	require.NoError(t, n.Inst.Close(ctx))
	evs := tr.Events(sid)
	last := evs[len(evs)-1]
	require.Equal(t, event.ExecutionInterrupted, last.Type)
	var in event.Interrupted
	require.NoError(t, last.Decode(&in))
	assert.Equal(t, event.ReasonShutdown, in.Reason)
	assert.Equal(t, x.ID(), tr.Claim(sid).ExecutionID, "shutdown keeps the claim")
	assert.Equal(t, "running", tr.PromptState(pid))
	n.Crash()

	d.Release()
	n2 := tr.Boot(d)
	assert.Equal(t, 1, n2.Report.Count(core.Resume))
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
}

// 3. Completion releases; with a second prompt queued the claim stays (the
// next turn starts in the terminal's transaction) and the second turn runs,
// even when the instance dies right after that terminal.
func TestCompletionReleasesAndQueuedPromptKeepsClaim(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		tr := treetest.New(t)
		d := treetest.NewDriver(4)
		n := tr.Boot(d)
		sid := n.NewSession("s")
		pid := n.Admit(sid, "hi")
		n.Idle()
		assert.Equal(t, "succeeded", tr.PromptState(pid))
		assert.False(t, tr.Claim(sid).Exists, "completion released the claim")
	})
	t.Run("queued", func(t *testing.T) {
		tr := treetest.New(t)
		d := treetest.NewDriver(8)
		n := tr.Boot(d)
		sid := n.NewSession("s")
		p1 := n.Admit(sid, "hold")
		<-d.Started
		p2 := n.Admit(sid, "second")
		assert.Equal(t, "queued", tr.PromptState(p2))
		// Commit 1 is the answer, commit 2 the terminal: die right after it.
		n.Kill.KillAt(2, true)
		d.Release()
		<-n.Kill.Died()
		n.Crash()
		assert.Equal(t, "succeeded", tr.PromptState(p1))
		c := tr.Claim(sid)
		require.True(t, c.Exists, "the claim stayed for the queued prompt")
		assert.NotEmpty(t, c.ExecutionID, "the next turn started in the terminal's transaction")

		n2 := tr.Boot(d)
		n2.Idle()
		assert.Equal(t, "succeeded", tr.PromptState(p2))
		assert.False(t, tr.Claim(sid).Exists)
		assert.Len(t, treetest.Terminals(tr.Events(sid)), 2)
	})
}

// 4. A user interrupt is durable before the call returns: killed right after
// it, the next boot never runs the turn again; queued prompts are cancelled.
func TestInterruptDurableBeforeReturnAndCancelsQueue(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	p1 := n.Admit(sid, "hold")
	<-d.Started
	p2 := n.Admit(sid, "queued one")
	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	n.Crash() // the instant the API would have answered

	assert.Equal(t, "interrupted", tr.PromptState(p1))
	assert.Equal(t, "cancelled", tr.PromptState(p2))
	assert.False(t, tr.Claim(sid).Exists)

	runs := d.Runs()
	n2 := tr.Boot(d)
	n2.Idle()
	assert.Equal(t, runs, d.Runs(), "no execution after the reboot")
	assert.Empty(t, n2.Report.Decisions)
	evs := tr.Events(sid)
	assert.Len(t, treetest.Terminals(evs), 1)
	assert.Len(t, treetest.OfType(evs, event.ExecutionStarted), 1)
}

// 5. An execution cancelled by an interrupt cannot append anything afterwards:
// a body that ignores cancellation is cut off by the execution-id fence once
// the grace period passes and the interrupt commits directly.
func TestInterruptedExecutionIsFencedAfterwards(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "stubborn")
	x := <-d.Started

	done := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		done <- err
	}()
	tr.Clock.BlockUntil(1) // the interrupt's grace timer
	tr.Clock.Advance(core.DefaultInterruptGrace)
	require.NoError(t, <-done)
	assert.Equal(t, "interrupted", tr.PromptState(pid))
	before := tr.Events(sid)

	_, err := x.Append(ctx, false, core.NewEvent{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: x.ID(), What: "late"}})
	require.ErrorIs(t, err, core.ErrFenced)
	d.Release() // the stubborn body finishes and tries to answer
	n.Idle()
	assert.Equal(t, before, tr.Events(sid), "nothing appended after the interrupt")
}

// 5b. The claim an interrupt released can be taken again by the next prompt's
// execution: the interrupted execution is then fenced because the claim names
// another execution, not because there is no claim.
func TestInterruptedExecutionIsFencedOnceANewerOneHoldsTheClaim(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "stubborn")
	old := <-d.Started

	done := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		done <- err
	}()
	tr.Clock.BlockUntil(1) // the interrupt's grace timer
	tr.Clock.Advance(core.DefaultInterruptGrace)
	require.NoError(t, <-done) // committed directly: old is still running

	next := n.Admit(sid, "hold")
	newer := <-d.Started
	require.Equal(t, newer.ID(), tr.Claim(sid).ExecutionID, "the new turn holds the claim")
	before := tr.Events(sid)

	_, err := old.Append(ctx, false, core.NewEvent{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: old.ID(), What: "late"}})
	require.ErrorIs(t, err, core.ErrFenced)
	assert.Equal(t, before, tr.Events(sid), "nothing appended by the interrupted execution")

	d.Release() // the stubborn body answers (fenced) and the new turn finishes
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(next))
	for _, e := range tr.Events(sid) {
		assert.NotContains(t, string(e.Data), old.ID()+".answer", "the interrupted execution's answer")
	}
	assert.Len(t, treetest.Terminals(tr.Events(sid)), 2, "interrupted, then the new turn's success")
}

// 6. An instance with an older epoch cannot append after a newer one booted,
// each on its own connection (a zombie and its successor).
func TestOlderEpochCannotAppendAfterNewerBoot(t *testing.T) {
	tr := treetest.New(t)
	zd := treetest.NewDriver(4)
	zombie := tr.Boot(zd)
	sid := zombie.NewSession("s")
	zombie.Admit(sid, "hold")
	zx := <-zd.Started

	sd := treetest.NewDriver(4)
	successor := tr.Boot(sd) // takes a new epoch and resumes the turn
	require.Greater(t, successor.Inst.Epoch(), zombie.Inst.Epoch())
	<-sd.Started

	_, err := zx.Append(ctx, false, core.NewEvent{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: zx.ID(), What: "zombie"}})
	require.ErrorIs(t, err, core.ErrFenced)
	_, err = zombie.Inst.Admit(ctx, sid, core.PromptInput{Text: "via zombie"})
	require.ErrorIs(t, err, core.ErrFenced)
	_, err = zombie.Inst.CreateSession(ctx, core.NewSession{ID: "z"})
	require.ErrorIs(t, err, core.ErrFenced)
	for _, e := range tr.Events(sid) {
		assert.NotContains(t, string(e.Data), "zombie")
	}
	sd.Release()
	successor.Idle()
	assert.Len(t, treetest.Terminals(tr.Events(sid)), 1)
}

// 7. The sweep skips sessions running here and never starts two executions
// for one session, however many sweeps run at once.
func TestSweepSkipsRunningHereAndNeverStartsTwo(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(64)
	n := tr.Boot(d)
	running := n.NewSession("running")
	n.Admit(running, "hold")
	<-d.Started
	// A second session whose claim never started (killed before the start).
	dead := n.NewSession("dead")
	n.Kill.KillAt(2, false)
	n.Admit(dead, "hold")
	n.Crash()

	d2 := treetest.NewDriver(64)
	host, _, _ := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, d2)
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	const sweeps = 8
	reports := make(chan recovery.Report, sweeps)
	for range sweeps {
		go func() {
			rep, err := recovery.Sweep(ctx, inst)
			assert.NoError(t, err)
			reports <- rep
		}()
	}
	started := 0
	for range sweeps {
		rep := <-reports
		started += rep.Count(core.Start) + rep.Count(core.Resume)
	}
	assert.Equal(t, 2, started, "one start per session across all sweeps")
	<-d2.Started
	<-d2.Started
	// Both now run here: a further sweep leaves them alone.
	rep, err := recovery.Sweep(ctx, inst)
	require.NoError(t, err)
	assert.Empty(t, rep.Decisions)
	assert.Equal(t, 2, d2.Runs())
	d2.Release()
	require.NoError(t, inst.WaitIdle(ctx))
	for _, sid := range []string{running, dead} {
		assert.Len(t, treetest.Terminals(tr.Events(sid)), 1, sid)
	}
}

// 8. The attempt is counted before the resumed execution runs and the claim
// is not consumed: killed inside the resumed execution, the next boot counts
// attempt 2.
func TestAttemptCountedBeforeResumedExecutionRuns(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()

	n2 := tr.Boot(d)
	x := <-d.Started
	// Inside the resumed execution: the count is already durable.
	assert.Equal(t, 1, x.Attempt())
	assert.Equal(t, 1, tr.Claim(sid).Attempts)
	resumed := treetest.OfType(tr.Events(sid), event.ExecutionResumed)
	require.Len(t, resumed, 1)
	n2.Crash()

	n3 := tr.Boot(d)
	x = <-d.Started
	assert.Equal(t, 2, x.Attempt())
	resumed = treetest.OfType(tr.Events(sid), event.ExecutionResumed)
	require.Len(t, resumed, 2)
	var r event.Resumed
	require.NoError(t, resumed[1].Decode(&r))
	assert.Equal(t, 2, r.Attempt)
	notices := 0
	for _, e := range treetest.OfType(tr.Events(sid), event.MessageAdded) {
		var m event.Message
		require.NoError(t, e.Decode(&m))
		if m.Role == event.RoleNotice {
			assert.Equal(t, event.ContinuationNotice, m.Text)
			notices++
		}
	}
	assert.Equal(t, 2, notices, "each resume adds the continuation notice")
	n3.Crash()
}

// 9. With the default budget of 10, resumes 1…10 run and the 11th count
// terminalizes with failed{type:"aborted"}, releases the claim and resets
// the count for the next turn.
func TestEleventhCountAbortsAndReleases(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(32)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	p1 := n.Admit(sid, "hold")
	p2 := n.Admit(sid, "after")
	<-d.Started
	n.Crash()
	for attempt := 1; attempt <= core.DefaultResumeBudget; attempt++ {
		n = tr.Boot(d)
		x := <-d.Started
		require.Equal(t, attempt, x.Attempt())
		require.Equal(t, p1, x.PromptID())
		n.Crash()
	}
	n = tr.Boot(d)
	x := <-d.Started // the aborted turn's terminal started the queued one
	assert.Equal(t, p2, x.PromptID())
	assert.Equal(t, 0, x.Attempt(), "the next turn starts with a fresh count")
	n.Idle()
	assert.Equal(t, "failed", tr.PromptState(p1))
	evs := tr.Events(sid)
	var failed event.Failed
	fails := treetest.OfType(evs, event.ExecutionFailed)
	require.Len(t, fails, 1)
	require.NoError(t, fails[0].Decode(&failed))
	assert.Equal(t, event.FailAborted, failed.Type)
	assert.Len(t, treetest.OfType(evs, event.ExecutionResumed), core.DefaultResumeBudget+1)
	assert.Equal(t, "succeeded", tr.PromptState(p2))
	assert.False(t, tr.Claim(sid).Exists)
}

// 10. A progress event resets the count in its own transaction.
func TestProgressResetsResumeCount(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Crash()
	for range 3 {
		n = tr.Boot(d)
		<-d.Started
		n.Crash()
	}
	require.Equal(t, 3, tr.Claim(sid).Attempts)

	n = tr.Boot(d)
	x := <-d.Started
	_, err := x.Append(ctx, true, core.NewEvent{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: x.ID(), What: "stream complete"}})
	require.NoError(t, err)
	assert.Equal(t, 0, tr.Claim(sid).Attempts, "progress reset the count")
	n.Crash()

	n = tr.Boot(d)
	x = <-d.Started
	assert.Equal(t, 1, x.Attempt(), "counting starts again from one")
	n.Crash()
}

// 11. A child's task turn no live job names is ended by the sweep (failed,
// aborted) and never resumed; a prompt a client queued behind it is the
// child's own and runs next; a child's task turn named by a live job
// resumes on its own budget.
func TestOrphanChildClaimsReleasedNotResumed(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	root := n.NewSession("root")

	n.Admit(root, "hold")
	rx := <-d.Started
	// The parent's turn starts two task children; root.2's job then ends
	// (its parent no longer waits for it) while its task turn runs on.
	live, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "hold", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	<-d.Started
	orphan, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-2", Prompt: "hold", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	<-d.Started
	require.Equal(t, "root.2", orphan.ID)
	_, err = rx.Append(ctx, false, core.NewEvent{Type: event.JobEnded, Payload: event.Job{ChildID: orphan.ID, CallID: "call-2"}})
	require.NoError(t, err)
	queuedOrphan := n.Admit(orphan.ID, "queued behind")
	n.Crash()

	d.Release()
	n2 := tr.Boot(d)
	n2.Idle()
	byID := map[string]core.Action{}
	for _, dec := range n2.Report.Decisions {
		byID[dec.SessionID] = dec.Action
	}
	assert.Equal(t, core.Release, byID[orphan.ID])
	assert.Equal(t, core.Resume, byID[live.ID])
	assert.Equal(t, core.Resume, byID[root])
	assert.False(t, tr.Claim(orphan.ID).Exists)
	assert.Empty(t, treetest.OfType(tr.Events(orphan.ID), event.ExecutionResumed), "the orphan was never resumed")
	starts := treetest.OfType(tr.Events(orphan.ID), event.ExecutionStarted)
	require.Len(t, starts, 2, "the task turn, then the client's own")
	assert.Len(t, treetest.Terminals(tr.Events(live.ID)), 1)
	// The task turn ends with the sweep's decision and the client's prompt
	// runs as a new turn, not the old one's continuation.
	assert.Equal(t, "failed", tr.PromptState(orphan.PromptID))
	assert.Equal(t, "succeeded", tr.PromptState(queuedOrphan))
	var second event.Started
	require.NoError(t, json.Unmarshal(starts[1].Data, &second))
	assert.Equal(t, queuedOrphan, second.PromptID)
	assert.True(t, second.TurnStart)
	for len(d.Started) > 0 { // the resumed executions' starts
		<-d.Started
	}
	later := n2.Admit(orphan.ID, "later")
	x := <-d.Started
	assert.Equal(t, later, x.PromptID())
	n2.Idle()
}

// 11b. A prompt a client sends a child (after its task turn ended, so no
// live job names it) is the child's own turn: a kill or a graceful restart
// resumes it on the child's own budget, and the prompt queued behind it
// runs next (docs/api.md: a 202 survives a kill).
func TestClientPromptToChildSurvivesRestart(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		name := "kill"
		if graceful {
			name = "graceful"
		}
		t.Run(name, func(t *testing.T) {
			tr := treetest.New(t)
			d := treetest.NewDriver(16)
			n := tr.Boot(d)
			root := n.NewSession("root")
			n.Admit(root, "hold")
			rx := <-d.Started
			child, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "done at once", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
			require.NoError(t, err)
			<-d.Started // the task turn, which answers at once

			own := n.Admit(child.ID, "hold mine")
			x := <-d.Started // after the task turn's end, which ended its job
			require.Equal(t, own, x.PromptID())
			require.Equal(t, "succeeded", tr.PromptState(child.PromptID))
			next := n.Admit(child.ID, "then this")
			if graceful {
				require.NoError(t, n.Inst.Close(ctx))
			}
			n.Crash()
			require.True(t, tr.Claim(child.ID).Exists)

			d.Release()
			n2 := tr.Boot(d)
			n2.Idle()
			var dec core.Decision
			for _, sd := range n2.Report.Decisions {
				if sd.SessionID == child.ID {
					dec = sd.Decision
				}
			}
			assert.Equal(t, core.Decision{Action: core.Resume, Attempt: 1}, dec, "resumed on the child's own budget")
			assert.Equal(t, "succeeded", tr.PromptState(own))
			assert.Equal(t, "succeeded", tr.PromptState(next))
			assert.False(t, tr.Claim(child.ID).Exists)
			assert.Len(t, treetest.OfType(tr.Events(child.ID), event.ExecutionResumed), 1)
		})
	}
}

// 11c. Interrupting a parent stops its children's task turns, not a turn a
// client sent a child after its task turn had ended.
func TestParentInterruptLeavesChildsOwnTurn(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	root := n.NewSession("root")
	n.Admit(root, "hold")
	rx := <-d.Started
	done, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "done at once", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	<-d.Started // done's task turn, which answers at once
	own := n.Admit(done.ID, "hold mine")
	ox := <-d.Started // after done's task turn ended
	require.Equal(t, own, ox.PromptID())
	task, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-2", Prompt: "hold task", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	<-d.Started

	did, err := n.Inst.Interrupt(ctx, root, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	assert.Equal(t, "interrupted", tr.PromptState(task.PromptID), "the task child running for the parent's turn is stopped")
	assert.Equal(t, "running", tr.PromptState(own), "the client's own turn on the other child goes on")
	assert.True(t, n.Inst.RunningHere(done.ID))
	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(own))
}

// 14. resume_attempts starts at zero for every new claim and every new turn.
func TestResumeAttemptsStartAtZeroForNewClaimsAndTurns(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Admit(sid, "second")
	n.Crash()
	for attempt := 1; attempt <= 2; attempt++ {
		n = tr.Boot(d)
		x := <-d.Started
		require.Equal(t, attempt, x.Attempt())
		if attempt < 2 {
			n.Crash()
		}
	}
	d.Release()
	x := <-d.Started // the queued turn, started by the terminal
	assert.Equal(t, "second", x.Prompt())
	assert.Equal(t, 0, x.Attempt(), "a new turn does not inherit the count")
	n.Idle()
	require.False(t, tr.Claim(sid).Exists)

	n.Admit(sid, "third") // a new claim
	x = <-d.Started
	assert.Equal(t, 0, x.Attempt())
	n.Idle()
}

// Claims older than the configured maximum age fail with aborted instead of
// resuming.
func TestClaimOlderThanMaxAgeIsAborted(t *testing.T) {
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithMaxClaimAge(time.Minute)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hold")
	<-d.Started
	n.Crash()
	tr.Clock.Advance(time.Minute + time.Second)
	n2 := tr.Boot(d)
	n2.Idle()
	assert.Equal(t, 1, n2.Report.Count(core.Abort))
	assert.Equal(t, "failed", tr.PromptState(pid))
	assert.Empty(t, treetest.OfType(tr.Events(sid), event.ExecutionResumed))
}

// A claim that never started its turn is for the oldest queued prompt: the
// server died between an admission and its turn's start, a second prompt
// was admitted behind it, and the server stayed down past the maximum claim
// age. The sweep aborts the first prompt, the one the claim was for, and
// the second runs as the next turn.
func TestClaimOlderThanMaxAgeAbortsItsOldestQueuedPrompt(t *testing.T) {
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithMaxClaimAge(time.Minute)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Kill.KillAt(2, false) // the admission commits; its turn's start does not
	first := n.Admit(sid, "first")
	<-n.Kill.Died()
	n.Crash()

	// An instance that has not swept yet admits a second prompt behind the
	// claim, which still names no execution.
	host, _, kdb := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, d)
	require.NoError(t, err)
	a, err := inst.Admit(ctx, sid, core.PromptInput{Text: "second"})
	require.NoError(t, err)
	second := a.PromptID
	kdb.Kill()
	inst.Abandon()
	require.Equal(t, "queued", tr.PromptState(first))
	require.Equal(t, "queued", tr.PromptState(second))
	c := tr.Claim(sid)
	require.True(t, c.Exists)
	require.Empty(t, c.ExecutionID, "the claim never started a turn")

	tr.Clock.Advance(time.Minute + time.Second)
	n2 := tr.Boot(d)
	n2.Idle()
	assert.Equal(t, 1, n2.Report.Count(core.Abort))
	assert.Equal(t, "failed", tr.PromptState(first), "the claim's turn, the oldest prompt's, is aborted")
	assert.Equal(t, "succeeded", tr.PromptState(second), "the next prompt runs")
	terms := treetest.Terminals(tr.Events(sid))
	require.Len(t, terms, 2)
	var f event.Failed
	require.NoError(t, terms[0].Decode(&f))
	assert.Equal(t, first, f.PromptID)
	assert.Equal(t, event.FailAborted, f.Type)
	assert.False(t, tr.Claim(sid).Exists)
}

// The maximum claim age is a duration, compared with claim ages in ms: with
// WithMaxClaimAge(time.Minute) a claim 30 s old resumes and one 2 min old
// is aborted (DESIGN §6.5; PolicyOf converts the config to ms).
func TestMaxClaimAgeIsMeasuredInTheClaimsUnit(t *testing.T) {
	for _, tc := range []struct {
		age     time.Duration
		aborted bool
	}{{30 * time.Second, false}, {2 * time.Minute, true}} {
		t.Run(tc.age.String(), func(t *testing.T) {
			tr := treetest.New(t)
			tr.Cfg = tr.Cfg.WithMaxClaimAge(time.Minute)
			d := treetest.NewDriver(4)
			n := tr.Boot(d)
			sid := n.NewSession("s")
			pid := n.Admit(sid, "hold")
			<-d.Started
			n.Crash()
			tr.Clock.Advance(tc.age)
			d.Release()
			n2 := tr.Boot(d)
			n2.Idle()
			if tc.aborted {
				assert.Equal(t, 1, n2.Report.Count(core.Abort))
				assert.Equal(t, "failed", tr.PromptState(pid))
				assert.Empty(t, treetest.OfType(tr.Events(sid), event.ExecutionResumed))
				return
			}
			assert.Zero(t, n2.Report.Count(core.Abort), "a claim younger than the maximum age is not aborted")
			assert.Len(t, treetest.OfType(tr.Events(sid), event.ExecutionResumed), 1, "it is resumed")
			assert.Equal(t, "succeeded", tr.PromptState(pid))
		})
	}
}

// The claim-age limit bounds roots only (DESIGN §6): a child's turn, a
// live job's task turn or its own, is resumed on its budget however old
// its claim, and only an old root claim is aborted.
func TestClaimAgeAbortsRootsOnly(t *testing.T) {
	p := recovery.Policy{Budget: 3, MaxClaimAge: 1000}
	now := int64(10_000)
	root := core.ClaimState{SessionID: "r", ExecutionID: "x", ClaimedAt: 0}
	assert.Equal(t, core.Abort, p.Decide(root, now).Action, "an old root claim is aborted")
	task := core.ClaimState{SessionID: "r.1", ParentID: "r", ExecutionID: "x", ClaimedAt: 0, JobLive: true}
	assert.Equal(t, core.Resume, p.Decide(task, now).Action, "a live job's child is resumed however old its claim")
	own := core.ClaimState{SessionID: "r.2", ParentID: "r", ExecutionID: "x", ClaimedAt: 0, OwnTurn: true}
	assert.Equal(t, core.Resume, p.Decide(own, now).Action, "a child's own turn is resumed however old its claim")
}

// The claim-age limit aborts a root whose claim is older than the maximum
// age (DESIGN §6 rule 5): a claim exactly that old is resumed, one a
// millisecond older is aborted.
func TestClaimExactlyMaxAgeOldIsResumed(t *testing.T) {
	p := recovery.Policy{Budget: 3, MaxClaimAge: 1000}
	c := core.ClaimState{SessionID: "r", ExecutionID: "x", ClaimedAt: 9_000}
	assert.Equal(t, core.Resume, p.Decide(c, 10_000).Action, "a claim exactly the maximum age old is not older than it")
	assert.Equal(t, core.Abort, p.Decide(c, 10_001).Action, "a millisecond more is")
}

// A sweep that cannot recover one session goes on to the others: a failure
// of one claim (here a commit hook refusing its resume) is not storage
// refusing every write, and must not strand the claims after it until the
// next wake-up.
func TestSweepGoesOnPastOneSessionsFailure(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	first, second := n.NewSession("a"), n.NewSession("b")
	n.Admit(first, "hold") // the older claim: swept first
	<-d.Started
	tr.Clock.Advance(time.Second)
	n.Admit(second, "hold")
	<-d.Started
	n.Crash()

	refused := errors.New("refused for this test")
	tr.Cfg = tr.Cfg.WithCommitHook(func(_ storage.Tx, ev event.Event) error {
		if ev.SessionID == first {
			return refused
		}
		return nil
	})
	host, _, _ := tr.Host()
	inst, err := core.Open(ctx, host, tr.Cfg, d)
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	rep, err := recovery.Sweep(ctx, inst)
	require.ErrorIs(t, err, refused, "the failure is reported")
	require.Len(t, rep.Decisions, 1)
	assert.Equal(t, second, rep.Decisions[0].SessionID, "and the next claim was swept all the same")
	assert.Equal(t, core.Resume, rep.Decisions[0].Action)
	x := <-d.Started
	assert.Equal(t, second, x.SessionID())
	d.Release()
	require.NoError(t, inst.WaitIdle(ctx))
}
