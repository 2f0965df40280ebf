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
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

var ctx = context.Background()

// threeSteps: step 1 calls the idempotent tool, step 2 the non-idempotent
// one, step 3 answers in text.
func threeSteps(k int) scriptStep {
	switch k {
	case 1:
		return scriptStep{chunks: toolCall("idem", `{"n":1}`)}
	case 2:
		return scriptStep{chunks: toolCall("once", `{"n":2}`)}
	default:
		return scriptStep{chunks: text("all ", "done")}
	}
}

// completedSteps reads, on its own connection, how many steps of the
// session's turns are recorded complete.
func completedSteps(tr *treetest.Tree, sid string) int {
	var n int
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT count(*) FROM steps WHERE session_id = ? AND state = 'completed'`, []any{sid}, &n)
		return err
	})
	return n
}

type crashRun struct {
	tr  *treetest.Tree
	m   *scriptModel
	l   *ledger
	sid string
}

func newCrashRun(t *testing.T) *crashRun {
	c := &crashRun{tr: treetest.New(t), l: newLedger(), sid: "s"}
	c.m = &scriptModel{steps: threeSteps, recorded: func(k int) bool { return completedSteps(c.tr, c.sid) >= k }}
	return c
}

func (c *crashRun) boot(t *testing.T) *treetest.Node {
	r := newRunner(t, c.m, runner.NewConfig(), c.l.tool("idem", true), c.l.tool("once", false))
	return c.tr.Boot(r)
}

func (c *crashRun) admit(n *treetest.Node) error {
	_, err := n.Inst.Admit(ctx, c.sid, core.PromptInput{ClientID: "p1", Text: "do the thing"})
	return err
}

// The crash test of the turn runner: count the N commits of a clean 3-step
// turn with two tool calls, then for each commit kill once just before and
// once just after it (2N runs), boot a fresh instance over the same
// database, let it finish, and check every promise.
func TestCrashBeforeAndAfterEveryCommit(t *testing.T) {
	clean := newCrashRun(t)
	n := clean.boot(t)
	n.NewSession(clean.sid)
	base := n.Kill.Commits()
	require.NoError(t, clean.admit(n))
	n.Idle()
	commits := n.Kill.Commits() - base
	require.Greater(t, commits, 8, "a 3-step turn with two tool calls commits more than this")
	require.Equal(t, "succeeded", clean.tr.PromptState(promptID(t, clean.tr, clean.sid)))
	require.Empty(t, clean.m.violations)

	runs := 0
	for i := 1; i <= commits; i++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("commit%02d/after=%v", i, after), func(t *testing.T) {
				runs++
				c := newCrashRun(t)
				n := c.boot(t)
				n.NewSession(c.sid)
				n.Kill.KillAt(i, after)
				_ = c.admit(n) // may die inside the admission itself
				<-n.Kill.Died()
				n.Crash()

				n2 := c.boot(t)
				require.NoError(t, c.admit(n2), "the client's retry is deduplicated or admitted")
				n2.Idle()

				evs := c.tr.Events(c.sid)
				terms := treetest.Terminals(evs)
				require.Len(t, terms, 1, "one terminal")
				assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
				assert.Empty(t, c.m.violations, "no recorded step requested again")
				assert.LessOrEqual(t, c.l.count("once"), 1, "the non-idempotent tool ran at most once")
				for key, effects := range c.l.effects {
					assert.Equal(t, 1, effects, "effect applied once for key %s", key)
				}
				assert.GreaterOrEqual(t, c.l.count("idem"), 1, "the idempotent call always completes")
				assert.False(t, c.tr.Claim(c.sid).Exists)
				assert.Len(t, treetest.OfType(evs, event.PromptAdmitted), 1)
			})
		}
	}
	assert.Equal(t, 2*commits, runs, "2N runs")
	t.Logf("clean turn: %d commits, %d crash runs", commits, runs)
}

func promptID(t *testing.T, tr *treetest.Tree, sid string) string {
	evs := treetest.OfType(tr.Events(sid), event.PromptAdmitted)
	require.NotEmpty(t, evs)
	var a event.Admitted
	require.NoError(t, evs[0].Decode(&a))
	return a.PromptID
}

// A killed stream resumes with the text of its last checkpoint in the
// transcript; what is lost is at most what arrived in the last checkpoint
// interval (1 s) and below the byte threshold (2 KiB).
func TestKilledStreamKeepsLastCheckpoint(t *testing.T) {
	tr := treetest.New(t)
	feed := make(chan model.Chunk)
	m := &scriptModel{steps: func(k int) scriptStep {
		if feed != nil {
			return scriptStep{feed: feed}
		}
		return scriptStep{chunks: text("resumed ", "answer")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 256)
	n.Admit(sid, "write a lot")
	waitFor := func(typ event.Type, text string) event.Event {
		return awaitEvent(t, sub, func(ev event.Event) bool { return ev.Type == typ && strings.Contains(string(ev.Data), text) })
	}
	waitFor(event.StepStarted, "")

	for _, w := range []string{"one ", "two ", "three "} {
		feed <- model.Chunk{Text: w}
	}
	waitFor(event.TextDelta, "three") // applied: the live delta follows
	tr.Clock.BlockUntil(3)            // wall, idle and the checkpoint timer are set
	tr.Clock.Advance(time.Second)     // the oldest unsaved text is a second old
	cp := waitFor(event.TextCheckpoint, "")
	var first event.Checkpoint
	require.NoError(t, cp.Decode(&first))
	assert.Equal(t, "one two three ", first.Text)

	big := strings.Repeat("x", runner.DefaultCheckpointBytes)
	feed <- model.Chunk{Text: big} // 2 KiB unsaved: checkpointed at once
	cp = waitFor(event.TextCheckpoint, "")
	var second event.Checkpoint
	require.NoError(t, cp.Decode(&second))
	assert.Equal(t, len(first.Text), second.Offset)

	feed <- model.Chunk{Text: "lost "} // younger than a second, under 2 KiB
	feed <- model.Chunk{Text: "words"}
	n.Crash()
	sub.Close()

	feed = nil
	n2 := tr.Boot(newRunner(t, m, runner.NewConfig()))
	n2.Idle()
	kept := "one two three " + big
	var cut event.Cut
	cuts := treetest.OfType(tr.Events(sid), event.StepCut)
	require.Len(t, cuts, 1)
	require.NoError(t, cuts[0].Decode(&cut))
	assert.Equal(t, kept, cut.Text, "the cut step keeps its checkpoints")
	assert.Equal(t, event.CutInterrupted, cut.Reason, "its execution died: a later one cut it")
	// What the kill lost is what arrived after the last checkpoint: under
	// the byte threshold and younger than the checkpoint interval.
	streamed := kept + "lost words"
	lost := streamed[len(cut.Text):]
	assert.Equal(t, "lost words", lost)
	assert.Less(t, len(lost), runner.DefaultCheckpointBytes, "loss bounded by the byte rule")

	// The resumed request carries the kept text, then the notice.
	msgs := m.lastReq.Messages
	require.GreaterOrEqual(t, len(msgs), 3)
	assert.Equal(t, model.Message{Role: model.RoleAssistant, Text: kept}, msgs[len(msgs)-2])
	assert.Equal(t, event.ContinuationNotice, msgs[len(msgs)-1].Text)
	assert.Equal(t, "succeeded", tr.PromptState(promptID(t, tr, sid)))
}

// A model stream that stalls forever is failed by the idle watchdog; the
// turn ends and no claim stays.
func TestStalledStreamFailedByWatchdog(t *testing.T) {
	tr := treetest.New(t)
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: []model.Chunk{{Text: "thinking "}}, stall: true} }}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hello")
	tr.Clock.BlockUntil(3) // wall, idle, checkpoint
	tr.Clock.Advance(runner.DefaultStreamIdle)
	n.Idle()
	fails := treetest.OfType(tr.Events(sid), event.ExecutionFailed)
	require.Len(t, fails, 1)
	var f event.Failed
	require.NoError(t, fails[0].Decode(&f))
	assert.Equal(t, event.FailModel, f.Type)
	assert.Contains(t, f.Message, "sent nothing for 1m0s")
	assert.Equal(t, "failed", tr.PromptState(pid))
	assert.False(t, tr.Claim(sid).Exists)
	cuts := treetest.OfType(tr.Events(sid), event.StepCut)
	require.Len(t, cuts, 1)
	var cut event.Cut
	require.NoError(t, cuts[0].Decode(&cut))
	assert.Equal(t, "thinking ", cut.Text)
}

// A tool that kills the instance every time it runs stops the turn after
// the budget with failed{type:"aborted"}: recovery's re-runs are not
// progress.
func TestToolKillingInstanceAbortsAfterBudget(t *testing.T) {
	tr := treetest.New(t)
	// Boot's sweep may start the resumed execution before Boot returns, so
	// the tool waits until it knows which node it runs on.
	var mu sync.Mutex
	var current *treetest.Node
	var booted chan struct{}
	killer := tool.Func{DefaultPermission: "allow", Name: "killer", IsIdempotent: true, Run: func(context.Context, tool.Call) (string, error) {
		mu.Lock()
		ready := booted
		mu.Unlock()
		<-ready
		mu.Lock()
		defer mu.Unlock()
		current.Kill.Kill()
		return "unreachable", nil
	}}
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: toolCall("killer", `{}`)} }}
	boot := func() *treetest.Node {
		mu.Lock()
		booted = make(chan struct{})
		mu.Unlock()
		n := tr.Boot(newRunner(t, m, runner.NewConfig(), killer))
		mu.Lock()
		current = n
		close(booted)
		mu.Unlock()
		return n
	}
	n := boot()
	sid := n.NewSession("s")
	pid := n.Admit(sid, "kill yourself")
	boots := 1
	for {
		<-n.Kill.Died()
		n.Crash()
		n = boot()
		boots++
		if len(treetest.Terminals(tr.Events(sid))) > 0 {
			break
		}
		require.Less(t, boots, 20, "the budget never ran out")
	}
	n.Idle()
	assert.Equal(t, core.DefaultResumeBudget+2, boots, "the first run, 10 resumes, then the 11th count aborts")
	requireAborted(t, tr, sid, pid)
	assert.Equal(t, 1, m.Requests(1), "the step was requested once")
}

// requireAborted checks that prompt pid's turn on session sid failed
// "aborted" (its resume budget ran out), once, and left no claim.
func requireAborted(t *testing.T, tr *treetest.Tree, sid, pid string) {
	t.Helper()
	fails := treetest.OfType(tr.Events(sid), event.ExecutionFailed)
	require.Len(t, fails, 1)
	var f event.Failed
	require.NoError(t, fails[0].Decode(&f))
	assert.Equal(t, event.FailAborted, f.Type)
	assert.Equal(t, "failed", tr.PromptState(pid))
	assert.False(t, tr.Claim(sid).Exists)
}

// The step cap ends a turn that never stops calling tools.
func TestStepCapEndsEndlessToolCalls(t *testing.T) {
	tr := treetest.New(t)
	l := newLedger()
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: toolCall("again", `{}`)} }}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), l.tool("again", true)))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "loop forever")
	n.Idle()
	var f event.Failed
	fails := treetest.OfType(tr.Events(sid), event.ExecutionFailed)
	require.Len(t, fails, 1)
	require.NoError(t, fails[0].Decode(&f))
	assert.Equal(t, event.FailStepLimit, f.Type)
	assert.Len(t, treetest.OfType(tr.Events(sid), event.StepStarted), runner.DefaultStepCap)
	assert.Equal(t, runner.DefaultStepCap, l.count("again"))
	assert.Equal(t, "failed", tr.PromptState(pid))
}

// Provider tool-call ids are never trusted: two calls in one answer with the
// same provider id, and a reused id in the next answer, stay apart.
func TestMintedCallIDsKeepCallsApart(t *testing.T) {
	tr := treetest.New(t)
	l := newLedger()
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "same", Name: "a", Arguments: `{}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "same", Name: "b", Arguments: `{}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("ok")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), l.tool("a", false), l.tool("b", false)))
	sid := n.NewSession("s")
	n.Admit(sid, "two calls")
	n.Idle()
	assert.Equal(t, 1, l.count("a"))
	assert.Equal(t, 1, l.count("b"))
	settled := treetest.OfType(tr.Events(sid), event.ToolSettled)
	require.Len(t, settled, 2)
	ids := map[string]bool{}
	for _, e := range settled {
		var s event.Settled
		require.NoError(t, e.Decode(&s))
		ids[s.CallID] = true
		assert.NotEqual(t, "same", s.CallID)
	}
	assert.Len(t, ids, 2)
	// The second request answers each call in order right after it.
	msgs := m.lastReq.Messages
	require.Len(t, msgs, 4)
	assert.Equal(t, msgs[1].ToolCalls[0].ID, msgs[2].ToolCallID)
	assert.Equal(t, msgs[1].ToolCalls[1].ID, msgs[3].ToolCallID)
}

// Every call of a step has its own idempotency key (the call's index in
// the step is part of it): two calls of one tool in one answer are two
// effects, never one that a receiver deduplicating by key would keep.
func TestCallsOfOneStepHaveTheirOwnKeys(t *testing.T) {
	tr := treetest.New(t)
	l := newLedger()
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "c0", Name: "a", Arguments: `{"n":1}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "c1", Name: "a", Arguments: `{"n":2}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("ok")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), l.tool("a", true)))
	sid := n.NewSession("s")
	n.Admit(sid, "two calls of one tool")
	n.Idle()
	assert.Equal(t, 2, l.count("a"))
	assert.Len(t, l.effects, 2, "two calls, two keys, two effects")
	keys := map[string]bool{}
	for _, e := range treetest.OfType(tr.Events(sid), event.ToolExecuting) {
		var x event.Executing
		require.NoError(t, e.Decode(&x))
		keys[x.IdempotencyKey] = true
	}
	assert.Len(t, keys, 2, "each call recorded with its own key")
}

// Tool limits: output is capped with a marker, and a body that ignores
// cancellation past its wall limit is abandoned and settled as timed out.
func TestToolLimits(t *testing.T) {
	tr := treetest.New(t)
	release, entered := make(chan struct{}), make(chan struct{})
	defer close(release)
	big := tool.Func{DefaultPermission: "allow", Name: "big", Limit: tool.Limits{OutputCap: 10}, Run: func(context.Context, tool.Call) (string, error) {
		return strings.Repeat("y", 100), nil
	}}
	stuck := tool.Func{DefaultPermission: "allow", Name: "stuck", Limit: tool.Limits{Timeout: time.Minute}, Run: func(context.Context, tool.Call) (string, error) {
		close(entered) // its wall-limit timer is already set
		<-release
		return "too late", nil
	}}
	m := &scriptModel{steps: func(k int) scriptStep {
		switch k {
		case 1:
			return scriptStep{chunks: toolCall("big", `{}`)}
		case 2:
			return scriptStep{chunks: toolCall("stuck", `{}`)}
		}
		return scriptStep{chunks: text("fine")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), big, stuck))
	sid := n.NewSession("s")
	n.Admit(sid, "limits")
	<-entered
	tr.Clock.Advance(time.Minute)
	n.Idle()
	var outs []event.Settled
	for _, e := range treetest.OfType(tr.Events(sid), event.ToolSettled) {
		var s event.Settled
		require.NoError(t, e.Decode(&s))
		outs = append(outs, s)
	}
	require.Len(t, outs, 2)
	assert.True(t, strings.HasPrefix(outs[0].Output, "yyyyyyyyyy\n[output truncated: 10 of 100 bytes shown]"), outs[0].Output)
	assert.Equal(t, event.OutcomeError, outs[1].Outcome)
	assert.Contains(t, outs[1].Output, "did not finish within 1m0s")
	assert.False(t, outs[1].Ran)
	assert.Len(t, treetest.Terminals(tr.Events(sid)), 1)
}

var _ = fakehost.ErrKilled
