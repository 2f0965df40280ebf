package runner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/openai"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// stuckModel's first request ignores cancellation: it returns only once
// release is closed, so an interrupt meanwhile waits out its grace period
// and is committed directly while the step is still started. Later
// requests answer at once.
type stuckModel struct {
	entered, release chan struct{}
	mu               sync.Mutex
	requests         int
}

func newStuckModel() *stuckModel {
	return &stuckModel{entered: make(chan struct{}), release: make(chan struct{})}
}

func (m *stuckModel) Name() string { return "stuck" }

func (m *stuckModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	m.requests++
	first := m.requests == 1
	m.mu.Unlock()
	if first {
		close(m.entered)
		<-m.release
	}
	return &scriptStream{s: scriptStep{chunks: text("fine")}}, nil
}

// cutOf decodes the session's only step.cut.
func cutOf(t *testing.T, evs []event.Event) (event.Cut, event.Event) {
	t.Helper()
	cuts := treetest.OfType(evs, event.StepCut)
	require.Len(t, cuts, 1, "the open step is cut")
	var c event.Cut
	require.NoError(t, cuts[0].Decode(&c))
	return c, cuts[0]
}

// assertNoPartial checks that the snapshot shows no step as still
// streaming, and the cut step's kept text (if any) as a plain answer.
func assertNoPartial(t *testing.T, n *treetest.Node, sid, kept string) {
	t.Helper()
	snap, err := n.Inst.Snapshot(ctx, sid, 0, 50)
	require.NoError(t, err)
	found := kept == ""
	for _, m := range snap.Messages {
		assert.False(t, m.Partial, "message %s (%.20q…) shows as still streaming after the turn ended", m.ID, m.Text)
		if kept != "" && m.Role == event.RoleAssistant && m.Text == kept {
			found = true
		}
	}
	assert.True(t, found, "the cut step's checkpointed text is in the transcript")
}

// An interrupt committed directly past the grace period, for the user or
// for a replacing prompt, cuts the step its stuck execution left started,
// in the interrupt's own transaction: the snapshot never shows that step
// as streaming, and the execution writes nothing afterwards (DESIGN §6.4).
func TestDirectInterruptCutsOpenStep(t *testing.T) {
	for _, reason := range []string{event.ReasonUser, event.ReasonSuperseded} {
		t.Run(reason, func(t *testing.T) {
			tr := treetest.New(t)
			m := newStuckModel()
			r := newRunner(t, m, runner.NewConfig())
			var pid string
			firstReturned := make(chan struct{})
			n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
				out := r.Run(ctx, x)
				if x.PromptID() == pid {
					close(firstReturned)
				}
				return out
			}))
			sid := n.NewSession("s")
			pid = n.Admit(sid, "think hard")
			<-m.entered

			done := make(chan error, 1)
			go func() {
				var err error
				if reason == event.ReasonUser {
					_, err = n.Inst.Interrupt(ctx, sid, event.ReasonUser)
				} else {
					_, err = n.Inst.Admit(ctx, sid, core.PromptInput{Text: "instead", Mode: event.ModeReplace})
				}
				done <- err
			}()
			tr.Clock.BlockUntil(1) // the interrupt's grace timer
			tr.Clock.Advance(core.DefaultInterruptGrace)
			require.NoError(t, <-done)
			n.Idle() // the replacing turn, if any; the stuck execution is forgotten
			require.Equal(t, "interrupted", tr.PromptState(pid))

			assertNoPartial(t, n, sid, "")
			evs := tr.Events(sid)
			cut, cutEv := cutOf(t, evs)
			assert.Equal(t, event.CutStopped, cut.Reason)
			assert.Empty(t, cut.Text)
			ints := treetest.OfType(evs, event.ExecutionInterrupted)
			require.Len(t, ints, 1)
			assert.Equal(t, cutEv.Seq+1, ints[0].Seq, "cut by the interrupt's transaction, just before it")

			close(m.release)
			<-firstReturned // the runner tried to cut the step itself and was fenced
			assert.Equal(t, evs, tr.Events(sid), "nothing written after the interrupt")
		})
	}
}

// streamThenCrash starts a turn whose stream checkpoints kept, then kills
// the instance mid-stream. It returns the session id and prompt id.
func streamThenCrash(t *testing.T, tr *treetest.Tree, kept string) (string, string) {
	t.Helper()
	feed := make(chan model.Chunk)
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{feed: feed} }}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 256)
	defer sub.Close()
	pid := n.Admit(sid, "write a lot")
	waitEvent(t, sub, event.StepStarted)
	feed <- model.Chunk{Text: kept} // past the byte threshold: checkpointed at once
	waitEvent(t, sub, event.TextCheckpoint)
	n.Crash()
	return sid, pid
}

func waitEvent(t *testing.T, sub *core.Subscription, typ event.Type) {
	t.Helper()
	awaitEvent(t, sub, func(ev event.Event) bool { return ev.Type == typ })
}

// Recovery that fails a turn with failed{type:"aborted"}, at the resume
// budget or at the claim's maximum age, cuts the step the dead execution
// left started, keeping its checkpointed text, in the same transaction.
func TestAbortCutsOpenStepKeepingCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     func(core.Config) core.Config
		advance time.Duration
	}{
		{"budget", func(c core.Config) core.Config { return c.WithResumeBudget(0) }, 0},
		{"claim age", func(c core.Config) core.Config { return c.WithMaxClaimAge(time.Minute) }, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := treetest.New(t)
			kept := strings.Repeat("k", runner.DefaultCheckpointBytes)
			sid, pid := streamThenCrash(t, tr, kept)

			tr.Cfg = tc.cfg(tr.Cfg)
			tr.Clock.Advance(tc.advance)
			n := tr.Boot(newRunner(t, &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: text("never")} }}, runner.NewConfig()))
			n.Idle()

			require.Equal(t, "failed", tr.PromptState(pid))
			assertNoPartial(t, n, sid, kept)
			evs := tr.Events(sid)
			terms := treetest.Terminals(evs)
			require.Len(t, terms, 1)
			var f event.Failed
			require.NoError(t, terms[0].Decode(&f))
			assert.Equal(t, event.FailAborted, f.Type)
			cut, cutEv := cutOf(t, evs)
			assert.Equal(t, event.CutInterrupted, cut.Reason)
			assert.Equal(t, kept, cut.Text, "the cut keeps the checkpoints")
			assert.Less(t, cutEv.Seq, terms[0].Seq)
			if tc.name == "budget" {
				// The count past the budget is followed only by the abort.
				prev := evs[terms[0].Seq-2]
				assert.Equal(t, event.ExecutionResumed, prev.Type)
			}
		})
	}
}

// A turn that ends failed{type:"storage"} while its step streams (the
// checkpoint that lost storage was the step's last write) has that step
// cut in the failure's transaction, keeping everything the step received:
// it was stopped cleanly, so the text of the checkpoint storage refused is
// kept too (docs/api.md).
func TestStorageFailureCutsOpenStep(t *testing.T) {
	tr := treetest.New(t)
	fault := tr.Faults()
	feed := make(chan model.Chunk)
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{feed: feed} }}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 256)
	defer sub.Close()
	pid := n.Admit(sid, "write a lot")
	waitEvent(t, sub, event.StepStarted)
	kept := strings.Repeat("k", runner.DefaultCheckpointBytes)
	feed <- model.Chunk{Text: kept}
	waitEvent(t, sub, event.TextCheckpoint)

	fault.FailFor(90*time.Second, faultvfs.Full) // past the write window
	refused := strings.Repeat("l", runner.DefaultCheckpointBytes)
	feed <- model.Chunk{Text: refused}
	n.IdleDriving()

	require.Equal(t, "failed", tr.PromptState(pid))
	kept += refused
	assertNoPartial(t, n, sid, kept)
	evs := tr.Events(sid)
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	var f event.Failed
	require.NoError(t, terms[0].Decode(&f))
	assert.Equal(t, event.FailStorage, f.Type)
	cut, cutEv := cutOf(t, evs)
	assert.Equal(t, event.CutStopped, cut.Reason)
	assert.Equal(t, kept, cut.Text)
	assert.Less(t, cutEv.Seq, terms[0].Seq)
}

// A model request the host's fence ended (a wasm host ends it with
// core.ErrFenced; the openai provider keeps that cause) stops the runner
// at once: no step.cut, no retry, no terminal is attempted, since a newer
// instance owns the tree. The step stays started for that owner to cut.
func TestFencedModelRequestStopsAtOnce(t *testing.T) {
	tr := treetest.New(t)
	m, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1", Model: "m",
		Client: httpmsg.DoerFunc(func(*httpmsg.Request) (*httpmsg.Response, error) {
			return nil, fmt.Errorf("egress ended: %w", core.ErrFenced)
		})})
	require.NoError(t, err)
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hello")
	n.Idle()

	evs := tr.Events(sid)
	assert.Equal(t, event.StepStarted, evs[len(evs)-1].Type, "nothing written after the fenced request")
	assert.Empty(t, treetest.OfType(evs, event.StepCut))
	assert.Empty(t, treetest.OfType(evs, event.RetryScheduled))
	assert.Equal(t, "running", tr.PromptState(pid))
	assert.True(t, tr.Claim(sid).Exists, "the claim is left to the instance that owns the tree")
}
