package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A scripted turn with tool calls, driven by the offline model through the
// real runner, loses its disk for a while in the middle: the first tool's
// body fills the disk, so the settlement of that call is the first write
// refused. Outages the 30 s write window rides out end succeeded with
// nothing written twice; a longer one ends failed{type:"storage"}. Either
// way the session is left idle and the file sound.
func TestScriptedTurnUnderFullDiskWindows(t *testing.T) {
	for _, tc := range []struct {
		outage time.Duration
		want   event.Type
	}{
		{5 * time.Second, event.ExecutionSucceeded},
		// As long as the write window: its last attempt is made as the
		// window closes, when the disk has room again.
		{retry.WriteWindow, event.ExecutionSucceeded},
		{90 * time.Second, event.ExecutionFailed},
	} {
		t.Run(fmt.Sprintf("outage=%s", tc.outage), func(t *testing.T) {
			tr := treetest.New(t)
			fault := tr.Faults()
			var fills, echoes atomic.Int32
			fill := tool.Func{DefaultPermission: "allow", Name: "fill", Run: func(context.Context, tool.Call) (string, error) {
				fills.Add(1)
				fault.FailFor(tc.outage, faultvfs.Full)
				return "the disk is full now", nil
			}}
			echo := tool.Func{DefaultPermission: "allow", Name: "echo", IsIdempotent: true, Run: func(_ context.Context, c tool.Call) (string, error) {
				echoes.Add(1)
				return string(c.Arguments), nil
			}}
			n := tr.Boot(newRunner(t, offline.New(tr.Clock, offline.Options{}), runner.NewConfig(), fill, echo))
			sid := n.NewSession("s")
			pid := n.Admit(sid, "/tool fill {}\n/tool echo {\"b\":2}\nall done")
			waits := n.IdleDriving()
			require.NotEmpty(t, waits, "the outage was met")

			evs := tr.Events(sid)
			terms := treetest.Terminals(evs)
			require.Len(t, terms, 1, "exactly one terminal")
			assert.Equal(t, tc.want, terms[0].Type)
			assert.Equal(t, int32(1), fills.Load(), "the non-idempotent tool ran once")
			assertNoDuplicates(t, evs)

			switch tc.want {
			case event.ExecutionSucceeded:
				assert.Equal(t, "succeeded", tr.PromptState(pid))
				assert.Equal(t, int32(1), echoes.Load())
				assert.Len(t, treetest.OfType(evs, event.StepCompleted), 3)
				assert.Len(t, treetest.OfType(evs, event.ToolSettled), 2)
				for _, w := range waits {
					assert.Equal(t, "write", w.Policy, "the write window rode it out")
				}
			default:
				var f event.Failed
				require.NoError(t, terms[0].Decode(&f))
				assert.Equal(t, event.FailStorage, f.Type)
				assert.True(t, strings.HasPrefix(f.Message, core.StorageFailurePrefix), f.Message)
				assert.Equal(t, "failed", tr.PromptState(pid))
				assert.Zero(t, echoes.Load(), "the turn stopped at the lost write")
				assert.Empty(t, treetest.OfType(evs, event.ToolSettled), "the fill call's settlement was lost")
			}

			assert.False(t, tr.Claim(sid).Exists, "the session is not left busy")
			snap, err := n.Inst.Snapshot(ctx, sid, 0, 50)
			require.NoError(t, err)
			assert.Equal(t, core.StatusIdle, snap.Status)
			assert.False(t, snap.ReadOnly)
			assert.Equal(t, "ok", tr.IntegrityCheck())

			// The session goes on working afterwards.
			next := n.Admit(sid, "again")
			n.Idle()
			assert.Equal(t, "succeeded", tr.PromptState(next))
		})
	}
}

// assertNoDuplicates checks that nothing of the turn was written twice:
// seqs contiguous, each step started, completed and each call executing
// and settled at most once.
func assertNoDuplicates(t *testing.T, evs []event.Event) {
	t.Helper()
	seen := map[string]bool{}
	for i, ev := range evs {
		assert.Equal(t, int64(i+1), ev.Seq, "seqs are contiguous")
		var key struct {
			StepID string `json:"step_id"`
			CallID string `json:"call_id"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &key))
		switch ev.Type {
		case event.StepStarted, event.StepCompleted, event.StepCut, event.ToolExecuting, event.ToolSettled:
			k := string(ev.Type) + "/" + key.StepID + key.CallID
			assert.False(t, seen[k], "%s written twice", k)
			seen[k] = true
		}
	}
}

// The step after a tool call is recorded started in the transaction that
// reads the transcript its request is built from. When that commit is
// reported failed although durable (a late IOERR), its rerun finds the
// step stored and runs nothing: the request is then built from a read of
// its own, so the model still sees the tool's result and the turn goes on
// (the non-idempotent tool is not asked again).
func TestLateFailedStepStartStillBuildsFromTheTranscript(t *testing.T) {
	tr := treetest.New(t)
	fault := tr.Faults()
	var fills atomic.Int32
	fill := tool.Func{DefaultPermission: "allow", Name: "fill", Run: func(context.Context, tool.Call) (string, error) {
		fills.Add(1)
		// The settlement of this call, then the next step's start.
		fault.FailLateCommits(2, faultvfs.IOErrFsync)
		return "filled", nil
	}}
	n := tr.Boot(newRunner(t, offline.New(tr.Clock, offline.Options{}), runner.NewConfig(), fill))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "/tool fill {}\nall done")
	n.IdleDriving()

	assert.Equal(t, 2, fault.LateCommits(), "both commits were reported failed")
	evs := tr.Events(sid)
	assertNoDuplicates(t, evs)
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Equal(t, int32(1), fills.Load(), "the tool ran once")
	done := treetest.OfType(evs, event.StepCompleted)
	require.Len(t, done, 2)
	var last event.StepDone
	require.NoError(t, done[1].Decode(&last))
	assert.Equal(t, "Tool fill returned: filled\nYou said: all done", last.Text, "the request carried the tool's result")
	assert.Empty(t, last.ToolCalls)
}

// fillingModel streams "alpha " and "beta ", and fills the disk for
// outage at one of two moments. With saved set, before "beta ": once saved
// is closed (the test saw "alpha " checkpointed). With full set, once the
// stream is stopped after "beta ", closing full; either way it then stalls
// until cancelled.
type fillingModel struct {
	fault  *faultvfs.Fault
	outage time.Duration
	saved  chan struct{}
	full   chan struct{}
}

func (m fillingModel) Name() string { return "filling" }

func (m fillingModel) Stream(context.Context, model.Request) (model.Stream, error) {
	return &fillingStream{m: m}, nil
}

type fillingStream struct {
	m fillingModel
	i int
}

func (s *fillingStream) Recv(ctx context.Context) (model.Chunk, error) {
	s.i++
	switch s.i {
	case 1:
		return model.Chunk{Text: "alpha "}, nil
	case 2:
		if s.m.saved != nil {
			select {
			case <-s.m.saved:
			case <-ctx.Done():
				return model.Chunk{}, ctx.Err()
			}
			s.m.fault.FailFor(s.m.outage, faultvfs.Full)
		}
		return model.Chunk{Text: "beta "}, nil
	}
	<-ctx.Done()
	if s.i == 3 && s.m.full != nil {
		s.m.fault.FailFor(s.m.outage, faultvfs.Full)
		close(s.m.full)
	}
	return model.Chunk{}, ctx.Err()
}

func (s *fillingStream) Close() error { return nil }

// A step whose checkpoint exhausts the write window mid-stream ends the
// turn failed{type:"storage"}, and its cut keeps everything received, not
// only what was checkpointed before the disk filled (docs/api.md: a
// cleanly stopped step keeps everything it received).
func TestStreamCutByStorageKeepsTheTextReceived(t *testing.T) {
	tr := treetest.New(t)
	m := fillingModel{fault: tr.Faults(), outage: 90 * time.Second, saved: make(chan struct{})}
	n := tr.Boot(newRunner(t, m, runner.NewConfig().WithCheckpoints(time.Hour, 1)))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 64)
	defer sub.Close()
	go func() {
		for ev := range sub.C {
			if ev.Type == event.TextCheckpoint {
				close(m.saved)
				return
			}
		}
	}()
	pid := n.Admit(sid, "go")
	require.NotEmpty(t, n.IdleDriving(), "the outage was met")

	evs := tr.Events(sid)
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	var f event.Failed
	require.NoError(t, terms[0].Decode(&f))
	assert.Equal(t, event.FailStorage, f.Type)
	assert.Equal(t, "failed", tr.PromptState(pid))

	cps := treetest.OfType(evs, event.TextCheckpoint)
	require.Len(t, cps, 1, "the first chunk was checkpointed before the disk filled")
	cuts := treetest.OfType(evs, event.StepCut)
	require.Len(t, cuts, 1)
	var c event.Cut
	require.NoError(t, cuts[0].Decode(&c))
	assert.Equal(t, "alpha beta ", c.Text, "everything received, not only the checkpoint")
	assert.Equal(t, event.CutStopped, c.Reason)
}

// The same cut when the user interrupts the turn and the disk fills as it
// stops, past the write window: storage refuses the step's own cut, and
// the interrupt may answer that storage is unavailable, but the stopped
// execution's record of the interrupt lands on the settlement schedule once
// storage returns and keeps everything the step received (nothing of it
// was checkpointed).
func TestInterruptDuringOutageKeepsTheTextReceived(t *testing.T) {
	tr := treetest.New(t)
	m := fillingModel{fault: tr.Faults(), outage: 90 * time.Second, full: make(chan struct{})}
	n := tr.Boot(newRunner(t, m, runner.NewConfig().WithCheckpoints(time.Hour, 100)))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 64)
	defer sub.Close()
	pid := n.Admit(sid, "go")
	awaitEvent(t, sub, func(ev event.Event) bool {
		return ev.Type == event.TextDelta && strings.Contains(string(ev.Data), "beta")
	})
	interrupted := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		interrupted <- err
	}()
	<-m.full // the stream saw the interrupt and the disk is full
	n.IdleDriving()
	if err := <-interrupted; err != nil {
		require.ErrorIs(t, err, core.ErrStorageUnavailable)
	}

	assert.Equal(t, "interrupted", tr.PromptState(pid))
	evs := tr.Events(sid)
	assert.Empty(t, treetest.OfType(evs, event.TextCheckpoint))
	cuts := treetest.OfType(evs, event.StepCut)
	require.Len(t, cuts, 1)
	var c event.Cut
	require.NoError(t, cuts[0].Decode(&c))
	assert.Equal(t, "alpha beta ", c.Text, "everything received")
}
