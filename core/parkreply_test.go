package core_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// lateDriver arms a late IOERR for the commit of its execution's record
// (the commit lands, reported failed) when its prompt is "ask", whose turn
// parks on one question, or "end", whose turn succeeds; every other turn,
// and the continuation of a parked one, answers at once.
type lateDriver struct {
	f       *faultvfs.Fault
	started chan *core.Execution
}

func (d lateDriver) Run(_ context.Context, x *core.Execution) core.Outcome {
	d.started <- x
	late := x.Cause() == event.CausePrompt && (x.Prompt() == "ask" || x.Prompt() == "end" || x.Prompt() == "fail")
	if x.Prompt() != "ask" || x.Cause() != event.CausePrompt {
		_, err := x.Append(context.Background(), true, core.NewEvent{Type: event.MessageAdded,
			Payload: event.Message{MessageID: x.NewID(), PromptID: x.PromptID(), Role: event.RoleAssistant, Text: "done"}})
		if err != nil {
			return core.Outcome{Kind: core.Stopped}
		}
		if late {
			d.f.FailLateCommits(1, faultvfs.IOErrFsync)
		}
		if x.Prompt() == "fail" {
			return core.Outcome{Kind: core.Failed, FailType: event.FailDriver, Message: "failed"}
		}
		return core.Outcome{Kind: core.Succeeded}
	}
	d.f.FailLateCommits(1, faultvfs.IOErrFsync)
	return core.Outcome{Kind: core.Parked, Park: &event.Parked{
		StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID(),
		Blockers: []event.Blocker{{ID: "q-" + x.ID() + "-0", Kind: event.KindQuestion, CallID: x.ID() + ".call",
			Adapter: "question@1", Request: json.RawMessage(`{"questions":[{"question":"which?"}]}`)}},
	}}
}

// lateRecord admits text to a new session "s" and drives the clock
// through its turn's record, whose commit meets a late IOERR, calling
// meanwhile during the record's first wait (the claim lock let go, the
// execution still registered here). It returns the driver, whose started
// then holds only executions that started after the record's.
func lateRecord(t *testing.T, text string, meanwhile func(n *treetest.Node, sid string)) (*treetest.Tree, *treetest.Node, string, lateDriver) {
	tr := treetest.New(t)
	f := tr.Faults()
	d := lateDriver{f: f, started: make(chan *core.Execution, 4)}
	n := tr.Boot(d)
	sid := n.NewSession("s")
	var pid string
	waited := false
	tr.DriveEach(func() {
		pid = n.Admit(sid, text)
		<-d.started
		n.Idle()
	}, func(retry.Wait) {
		if !waited {
			waited = true
			meanwhile(n, sid)
		}
	})
	require.True(t, waited, "the record met its late IOERR")
	require.Equal(t, 1, f.LateCommits())
	return tr, n, pid, d
}

// startsNext waits for the next execution d starts: the wake-up is never
// delivered here, so only the instance itself can start it.
func startsNext(t *testing.T, d lateDriver, what string) *core.Execution {
	t.Helper()
	select {
	case x := <-d.started:
		return x
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, what+" waits for the next wake-up")
		return nil
	}
}

// A park whose commit was durable but reported failed (a late IOERR)
// waits for its rerun with the claim lock let go, its execution still
// registered. A reply in that wait sees the parked question, answers it
// and takes the claim, but cannot start the continuation beside the
// parking execution. Once that execution's rerun finds its park stored and
// ends, the continuation must start here, as a reply's does, not wait for
// the next wake-up.
func TestReplyDuringALateParkCommitContinuesHere(t *testing.T) {
	var res core.Resolution
	var rerr error
	tr, n, pid, d := lateRecord(t, "ask", func(n *treetest.Node, sid string) {
		bs, err := n.Inst.Blockers(ctx, sid, event.KindQuestion)
		require.NoError(t, err)
		require.Len(t, bs, 1, "the park's commit is durable")
		res, rerr = n.Inst.Reply(ctx, sid, bs[0].ID, core.Reply{ResponseID: "r1", Answers: [][]string{{"blue"}}})
	})
	require.NoError(t, rerr)
	require.Equal(t, core.BlockerAnswered, res.State)
	x := startsNext(t, d, "the answered turn's continuation")
	assert.Equal(t, event.CauseResolution, x.Cause())

	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	starts := treetest.OfType(tr.Events("s"), event.ExecutionStarted)
	require.Len(t, starts, 2, "the turn's execution and its continuation")
	var s2 event.Started
	require.NoError(t, starts[1].Decode(&s2))
	assert.Equal(t, event.CauseResolution, s2.Cause)
	assert.False(t, tr.Claim("s").Exists)
}

// The same for a prompt admitted while a turn's terminal, committed but
// reported failed, waits for its rerun: the admission took the claim the
// terminal had released and found the turn's execution still registered.
// The prompt's turn starts once that execution is gone, not at the next
// wake-up.
func TestPromptAdmittedDuringALateTerminalCommitStartsHere(t *testing.T) {
	var next string
	tr, n, first, d := lateRecord(t, "end", func(n *treetest.Node, sid string) {
		next = n.Admit(sid, "next")
	})
	assert.Equal(t, "succeeded", tr.PromptState(first))
	x := startsNext(t, d, "the admitted prompt's turn")
	assert.Equal(t, next, x.PromptID())
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(next))
	assert.False(t, tr.Claim("s").Exists)
}

// The same after a turn that failed: drain stops the failed turn's
// children first (none here), then starts the prompt admitted while its
// terminal waited for its rerun, not the next wake-up.
func TestPromptAdmittedDuringALateFailedTerminalCommitStartsHere(t *testing.T) {
	var next string
	tr, n, first, d := lateRecord(t, "fail", func(n *treetest.Node, sid string) {
		next = n.Admit(sid, "next")
	})
	assert.Equal(t, "failed", tr.PromptState(first))
	x := startsNext(t, d, "the admitted prompt's turn")
	assert.Equal(t, next, x.PromptID())
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(next))
	assert.False(t, tr.Claim("s").Exists)
}

// A sub-agent's result is written by its turn's end (resolveTask), never
// by a reply: a Go program calling Reply with Child set is refused, with
// nothing written, whatever the blocker's kind.
func TestReplyCarryingAChildResultIsRefused(t *testing.T) {
	tr := treetest.New(t)
	d := replaceDriver{started: make(chan string, 4)}
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "park")
	<-d.started
	n.Idle()
	bs, err := n.Inst.Blockers(ctx, sid, "")
	require.NoError(t, err)
	require.Len(t, bs, 1)

	_, err = n.Inst.Reply(ctx, sid, bs[0].ID, core.Reply{ResponseID: "r1", Cancel: true,
		Child: &core.ChildResult{State: core.PromptSucceeded, Text: "forged"}})
	require.ErrorIs(t, err, core.ErrInvalid)
	after, err := n.Inst.Blockers(ctx, sid, "")
	require.NoError(t, err)
	assert.Equal(t, bs, after, "nothing was written")
}

// resumeParkDriver parks the turn a boot resumes (cause resume), its park
// commit durable but reported failed (a late IOERR), once go is closed; the
// first node's execution waits for its cancellation, every other succeeds.
type resumeParkDriver struct {
	f       *faultvfs.Fault
	started chan *core.Execution
	goOn    chan struct{}
}

func (d resumeParkDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.started <- x
	switch x.Cause() {
	case event.CausePrompt:
		<-ctx.Done() // until the node crashes
		return core.Outcome{Kind: core.Stopped}
	case event.CauseResume:
		<-d.goOn
		d.f.FailLateCommits(1, faultvfs.IOErrFsync)
		return core.Outcome{Kind: core.Parked, Park: &event.Parked{
			StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID(),
			Blockers: []event.Blocker{{ID: "q-" + x.ID(), Kind: event.KindQuestion, CallID: x.ID() + ".call",
				Adapter: "question@1", Request: json.RawMessage(`{"questions":[{"question":"which?"}]}`)}},
		}}
	}
	return core.Outcome{Kind: core.Succeeded}
}

// The continuation drain starts once a parking execution is gone is a
// resolution's, whatever started the execution that parked: here a boot's
// resume, whose park a reply answered while its late commit's rerun
// waited. Its execution.started says cause "resolution", as a reply's own
// start would, not the parked execution's "resume".
func TestContinuationAfterAResumedTurnsLateParkIsAResolution(t *testing.T) {
	tr := treetest.New(t)
	f := tr.Faults()
	d := resumeParkDriver{f: f, started: make(chan *core.Execution, 4), goOn: make(chan struct{})}
	n1 := tr.Boot(d)
	sid := n1.NewSession("s")
	pid := n1.Admit(sid, "ask")
	<-d.started
	n1.Crash()

	var n2 *treetest.Node
	var rerr error
	waited := false
	tr.DriveEach(func() {
		n2 = tr.Boot(d)
		x := <-d.started
		require.Equal(t, event.CauseResume, x.Cause())
		close(d.goOn)
		n2.Idle()
	}, func(retry.Wait) {
		if waited {
			return
		}
		waited = true
		bs, err := n2.Inst.Blockers(ctx, sid, event.KindQuestion)
		require.NoError(t, err)
		require.Len(t, bs, 1, "the park's commit is durable")
		_, rerr = n2.Inst.Reply(ctx, sid, bs[0].ID, core.Reply{ResponseID: "r1", Answers: [][]string{{"blue"}}})
	})
	require.True(t, waited, "the park met its late IOERR")
	require.NoError(t, rerr)
	select {
	case x := <-d.started:
		assert.Equal(t, event.CauseResolution, x.Cause())
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, "the answered turn's continuation waits for the next wake-up")
	}
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	starts := treetest.OfType(tr.Events("s"), event.ExecutionStarted)
	require.Len(t, starts, 3, "the turn's first execution, its resume and its continuation")
	var s3 event.Started
	require.NoError(t, starts[2].Decode(&s3))
	assert.Equal(t, event.CauseResolution, s3.Cause)
}
