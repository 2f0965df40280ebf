package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An answer whose stored JSON would pass core.MaxStoredText (300 KiB of '<',
// six bytes each as stored: 1.8 MB, near a Durable Object's 2 MB a value)
// fails its step with failed{type:"model"}: the step is cut with the text
// received before the chunk that would have passed the bound, and no
// event is stored over it. Before, the step's session.step.completed@1
// was stored whole; on a Durable Object that write, then every cut of the
// step, failed SQLITE_TOOBIG, and the tree stayed busy for good.
func TestOversizedAnswerFailsItsStep(t *testing.T) {
	tr := treetest.New(t)
	chunk := strings.Repeat("<", 1<<10)
	var chunks []model.Chunk
	for range 300 {
		chunks = append(chunks, model.Chunk{Text: chunk})
	}
	chunks = append(chunks, model.Chunk{Finish: model.FinishStop})
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: chunks} }}
	evs, pid := oneTurn(tr, newRunner(t, m, runner.NewConfig()), "say a lot")
	requireStoredWithinBound(t, evs)
	f := requireModelFailure(t, evs)
	assert.Contains(t, f.Message, "The model's answer is larger than")
	assert.Equal(t, "failed", tr.PromptState(pid))
	assert.Empty(t, treetest.OfType(evs, event.StepCompleted))
	cuts := treetest.OfType(evs, event.StepCut)
	require.Len(t, cuts, 1)
	var cut event.Cut
	require.NoError(t, cuts[0].Decode(&cut))
	assert.Equal(t, core.MaxStoredText/6/len(chunk)*len(chunk), len(cut.Text), "the chunks that fit")
}

// Tool-call arguments count towards the bound as the text does.
func TestOversizedToolCallFailsItsStep(t *testing.T) {
	tr := treetest.New(t)
	args := `{"s":"` + strings.Repeat("&", 300<<10) + `"}`
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: toolCall("big", args)} }}
	l := newLedger()
	evs, _ := oneTurn(tr, newRunner(t, m, runner.NewConfig(), l.tool("big", true)), "call it")
	requireStoredWithinBound(t, evs)
	requireModelFailure(t, evs)
	assert.Zero(t, l.count("big"))
}

// A tool's output is cut to core.MaxStoredText as stored whatever the output
// cap: with tool_output_cap at 1 MiB, 400 KiB of '<' (2.4 MB as stored)
// would be a tool.settled no Durable Object stores.
func TestToolOutputBoundAsStored(t *testing.T) {
	tr := treetest.New(t)
	out := strings.Repeat("<", 400<<10)
	big := tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true,
		Run: func(context.Context, tool.Call) (string, error) { return out, nil }}
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall("big", `{}`)}
		}
		return scriptStep{chunks: text("done")}
	}}
	evs, _ := oneTurn(tr, newRunner(t, m, runner.NewConfig().WithOutputCap(1<<20), big), "call it")
	requireStoredWithinBound(t, evs)
	settled := treetest.OfType(evs, event.ToolSettled)
	require.Len(t, settled, 1)
	var s event.Settled
	require.NoError(t, settled[0].Decode(&s))
	assert.Equal(t, event.OutcomeOK, s.Outcome)
	assert.LessOrEqual(t, core.StoredLen(s.Output), core.MaxStoredText, "the output with its note is within the bound")
	assert.Equal(t, out[:273050]+"\n[output truncated: 273050 of 409600 bytes shown]", s.Output)
	require.Len(t, treetest.OfType(evs, event.ExecutionSucceeded), 1)
}

// A step whose checkpointed text is past the bound as stored (a tree
// written before the runner held answers to it) is cut with the longest
// prefix that fits, whether its turn resumes (the runner cuts it) or its
// resume budget is spent (recovery cuts it as it ends the turn): the cut
// is stored and the turn ends. Before, the cut was the whole text, which a
// Durable Object refused at every sweep.
func TestRecoveryCutsAnOversizedStepToTheBound(t *testing.T) {
	for name, budget := range map[string]int{"resumed": 10, "budget spent": 0} {
		t.Run(name, func(t *testing.T) {
			tr := treetest.New(t)
			tr.Cfg = tr.Cfg.WithResumeBudget(budget)
			feed := make(chan model.Chunk)
			m := &scriptModel{steps: func(k int) scriptStep {
				if feed != nil {
					return scriptStep{feed: feed}
				}
				return scriptStep{chunks: text("resumed")}
			}}
			n := tr.Boot(newRunner(t, m, runner.NewConfig()))
			sid := n.NewSession("s")
			sub := n.Inst.Subscribe(sid, 256)
			n.Admit(sid, "write a lot")
			feed <- model.Chunk{Text: strings.Repeat("x", runner.DefaultCheckpointBytes)} // checkpointed at once
			awaitEvent(t, sub, func(ev event.Event) bool { return ev.Type == event.TextCheckpoint })
			n.Crash()
			sub.Close()
			huge := strings.Repeat("<", 300<<10)
			tr.Read(func(tx storage.Tx) error {
				_, err := tx.Exec(`UPDATE steps SET text = ? WHERE state = 'started'`, huge)
				return err
			})

			feed = nil
			tr.Boot(newRunner(t, m, runner.NewConfig())).Idle()
			evs := tr.Events(sid)
			requireStoredWithinBound(t, evs)
			cuts := treetest.OfType(evs, event.StepCut)
			require.Len(t, cuts, 1)
			var cut event.Cut
			require.NoError(t, cuts[0].Decode(&cut))
			assert.Equal(t, huge[:core.MaxStoredText/6], cut.Text)
			require.Len(t, treetest.Terminals(evs), 1)
		})
	}
}

// requireStoredWithinBound: no event of evs is stored over the bound (the
// text's, with room for the rest of its event).
func requireStoredWithinBound(t *testing.T, evs []event.Event) {
	t.Helper()
	for _, e := range evs {
		assert.LessOrEqual(t, len(e.Data), core.MaxStoredText+1024, "%s", e.Type)
	}
}

// oneTurn boots a tree with driver d, sends a new session one prompt, and
// returns the session's log once the turn is over, and the prompt's id.
func oneTurn(tr *treetest.Tree, d core.Driver, prompt string) ([]event.Event, string) {
	n := tr.Boot(d)
	sid := n.NewSession("s")
	pid := n.Admit(sid, prompt)
	n.Idle()
	return tr.Events(sid), pid
}

// requireModelFailure: the turn failed once, as the model's failure.
func requireModelFailure(t *testing.T, evs []event.Event) event.Failed {
	t.Helper()
	fails := treetest.OfType(evs, event.ExecutionFailed)
	require.Len(t, fails, 1)
	var f event.Failed
	require.NoError(t, fails[0].Decode(&f))
	assert.Equal(t, event.FailModel, f.Type)
	return f
}

// The bound is on the answer as stored: one exactly at core.MaxStoredText
// completes its step, and a tool call's record counts towards it as well
// as its name and arguments (a text that leaves no room for the record
// fails the step, though its name and arguments alone would fit).
func TestAnswerAtTheBoundCompletesAndACallsRecordCounts(t *testing.T) {
	// fill is n bytes as stored, mostly of '<' (six each: a short stream).
	fill := func(n int) []model.Chunk {
		s := strings.Repeat("<", n/6) + strings.Repeat("x", n%6)
		var out []model.Chunk
		for len(s) > 0 {
			k := min(len(s), 1<<10)
			out = append(out, model.Chunk{Text: s[:k]})
			s = s[k:]
		}
		return out
	}
	t.Run("at the bound", func(t *testing.T) {
		tr := treetest.New(t)
		chunks := append(fill(core.MaxStoredText), model.Chunk{Finish: model.FinishStop})
		m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: chunks} }}
		evs, _ := oneTurn(tr, newRunner(t, m, runner.NewConfig()), "say exactly this much")
		requireStoredWithinBound(t, evs)
		assert.Empty(t, treetest.OfType(evs, event.ExecutionFailed))
		require.Len(t, treetest.OfType(evs, event.StepCompleted), 1)
		require.Len(t, treetest.OfType(evs, event.ExecutionSucceeded), 1)
	})
	t.Run("no room for the call's record", func(t *testing.T) {
		tr := treetest.New(t)
		// "big" and "{}" fit in the 64 bytes left; the call's record
		// ({"call_id":…,"index":0,…}) does not.
		chunks := append(fill(core.MaxStoredText-64),
			model.Chunk{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: "big", Arguments: `{}`}},
			model.Chunk{Finish: model.FinishToolCalls})
		m := &scriptModel{steps: func(k int) scriptStep {
			if k > 1 {
				return scriptStep{chunks: text("done")}
			}
			return scriptStep{chunks: chunks}
		}}
		l := newLedger()
		evs, _ := oneTurn(tr, newRunner(t, m, runner.NewConfig(), l.tool("big", true)), "say this much, then call it")
		requireStoredWithinBound(t, evs)
		requireModelFailure(t, evs)
		assert.Zero(t, l.count("big"))
	})
}
