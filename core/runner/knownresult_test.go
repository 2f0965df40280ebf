package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

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

// bodyLog records each run of a tool body and its idempotency key, and
// announces the run on entered.
type bodyLog struct {
	mu      sync.Mutex
	keys    []string
	entered chan struct{}
}

func newBodyLog() *bodyLog { return &bodyLog{entered: make(chan struct{}, 8)} }

// enter records a run and returns its number (1 for the first).
func (b *bodyLog) enter(c tool.Call) int {
	b.mu.Lock()
	b.keys = append(b.keys, c.IdempotencyKey)
	n := len(b.keys)
	b.mu.Unlock()
	b.entered <- struct{}{}
	return n
}

func (b *bodyLog) runs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.keys...)
}

// oneToolThenAnswer calls the named tool in step 1 and answers in step 2.
func oneToolThenAnswer(name string) *scriptModel {
	return &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall(name, `{"amount":42}`)}
		}
		return scriptStep{chunks: text("paid")}
	}}
}

func settlements(t *testing.T, evs []event.Event) []event.Settled {
	t.Helper()
	var out []event.Settled
	for _, e := range treetest.OfType(evs, event.ToolSettled) {
		var s event.Settled
		require.NoError(t, e.Decode(&s))
		out = append(out, s)
	}
	return out
}

// seqOf is the seq of the first event of typ, or 0.
func seqOf(evs []event.Event, typ event.Type) int64 {
	for _, e := range evs {
		if e.Type == typ {
			return e.Seq
		}
	}
	return 0
}

// A non-idempotent tool whose body returns after a graceful shutdown
// cancelled it has a known result: it is settled with that result before
// the shutdown is recorded, so the resumed turn neither runs the body again
// nor tells the model the outcome is unknown.
func TestKnownToolResultSurvivesShutdown(t *testing.T) {
	tr := treetest.New(t)
	bodies := newBodyLog()
	charge := tool.Func{DefaultPermission: "allow", Name: "charge", Run: func(ctx context.Context, c tool.Call) (string, error) {
		bodies.enter(c)
		<-ctx.Done()                 // the shutdown arrives while the effect is under way
		return "charged 42 EUR", nil // and the effect completed all the same
	}}
	m := oneToolThenAnswer("charge")
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), charge))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "pay")
	<-bodies.entered
	require.NoError(t, n.Inst.Close(ctx))
	n.Crash()
	settledAt, stoppedAt := seqOf(tr.Events(sid), event.ToolSettled), seqOf(tr.Events(sid), event.ExecutionInterrupted)
	assert.True(t, settledAt > 0 && settledAt < stoppedAt, "settled (#%d) before the shutdown record (#%d)", settledAt, stoppedAt)
	assert.Zero(t, m.Requests(2), "the stopping execution asked the model nothing more")

	n2 := tr.Boot(newRunner(t, m, runner.NewConfig(), charge))
	n2.Idle()
	require.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Len(t, bodies.runs(), 1, "the body ran once")
	s := settlements(t, tr.Events(sid))
	require.Len(t, s, 1)
	assert.Equal(t, event.OutcomeOK, s[0].Outcome)
	assert.Equal(t, "charged 42 EUR", s[0].Output)
	assert.True(t, s[0].Ran)
	var results []string
	for _, msg := range m.lastReq.Messages {
		if msg.Role == model.RoleTool {
			results = append(results, msg.Text)
		}
	}
	assert.Equal(t, []string{"charged 42 EUR"}, results, "the model is told the real result")
}

// A body that answers a shutdown's cancellation with the cancellation error
// gives no result: the call stays executing, and an idempotent tool is run
// again on resume with the same key, as before.
func TestToolStoppedByShutdownIsRerunIfIdempotent(t *testing.T) {
	tr := treetest.New(t)
	bodies := newBodyLog()
	fetch := tool.Func{DefaultPermission: "allow", Name: "fetch", IsIdempotent: true, Run: func(ctx context.Context, c tool.Call) (string, error) {
		if bodies.enter(c) == 1 {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "fetched", nil
	}}
	m := oneToolThenAnswer("fetch")
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), fetch))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "fetch it")
	<-bodies.entered
	require.NoError(t, n.Inst.Close(ctx))
	n.Crash()
	assert.Empty(t, settlements(t, tr.Events(sid)), "no result to settle")

	n2 := tr.Boot(newRunner(t, m, runner.NewConfig(), fetch))
	n2.Idle()
	require.Equal(t, "succeeded", tr.PromptState(pid))
	keys := bodies.runs()
	require.Len(t, keys, 2)
	assert.Equal(t, keys[0], keys[1], "re-run with the same key")
	s := settlements(t, tr.Events(sid))
	require.Len(t, s, 1)
	assert.Equal(t, "fetched", s[0].Output)
}

// A user interrupt within the grace period: the body returns its result
// after the cancellation, the execution settles the call and then records
// interrupted{user} itself; nothing follows the interrupt.
func TestKnownToolResultSettledBeforeUserInterrupt(t *testing.T) {
	tr := treetest.New(t)
	bodies := newBodyLog()
	charge := tool.Func{DefaultPermission: "allow", Name: "charge", Run: func(ctx context.Context, c tool.Call) (string, error) {
		bodies.enter(c)
		<-ctx.Done()
		return "charged 42 EUR", nil
	}}
	n := tr.Boot(newRunner(t, oneToolThenAnswer("charge"), runner.NewConfig(), charge))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "pay")
	<-bodies.entered
	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	n.Idle()

	require.Equal(t, "interrupted", tr.PromptState(pid))
	evs := tr.Events(sid)
	require.GreaterOrEqual(t, len(evs), 2)
	assert.Equal(t, event.ExecutionInterrupted, evs[len(evs)-1].Type, "nothing after the interrupt")
	assert.Equal(t, event.ToolSettled, evs[len(evs)-2].Type, "the known result settled just before it")
	s := settlements(t, evs)
	require.Len(t, s, 1)
	assert.Equal(t, "charged 42 EUR", s[0].Output)
}

// A body that ignores the interrupt past the grace period returns after the
// interrupt was committed directly: its result is refused by the fence and
// nothing is written after the interrupt (DESIGN §6.4).
func TestToolResultAfterDirectInterruptIsNotSettled(t *testing.T) {
	tr := treetest.New(t)
	bodies := newBodyLog()
	release := make(chan struct{})
	charge := tool.Func{DefaultPermission: "allow", Name: "charge", Run: func(ctx context.Context, c tool.Call) (string, error) {
		bodies.enter(c)
		<-release // ignores cancellation
		return "charged 42 EUR", nil
	}}
	r := newRunner(t, oneToolThenAnswer("charge"), runner.NewConfig(), charge)
	runReturned := make(chan struct{}, 1)
	n := tr.Boot(core.DriverFunc(func(ctx context.Context, x *core.Execution) core.Outcome {
		out := r.Run(ctx, x)
		runReturned <- struct{}{}
		return out
	}))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "pay")
	<-bodies.entered

	interruptPastGrace(t, tr, n, sid)
	require.Equal(t, "interrupted", tr.PromptState(pid))
	before := tr.Events(sid)

	close(release)
	<-runReturned // the runner tried to settle and gave up
	assert.Equal(t, before, tr.Events(sid), "nothing written after the interrupt")
	assert.Empty(t, settlements(t, before))
}

// interruptPastGrace interrupts sid while one of its tool bodies ignores
// the cancellation: the interrupt waits out its grace period on the fake
// clock and commits without the body.
func interruptPastGrace(t *testing.T, tr *treetest.Tree, n *treetest.Node, sid string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
		done <- err
	}()
	tr.Clock.BlockUntil(2) // the tool's wall limit and the interrupt's grace timer
	tr.Clock.Advance(core.DefaultInterruptGrace)
	require.NoError(t, <-done)
}

// A body that ignores a shutdown's cancellation until its time limit has
// passed gives no result either: the call stays executing, and on resume a
// tool that is not idempotent is settled as of unknown outcome, never run
// again and never reported as merely timed out.
func TestToolPastItsLimitAfterShutdownIsUnknown(t *testing.T) {
	tr := treetest.New(t)
	bodies := newBodyLog()
	cancelled, release := make(chan struct{}), make(chan struct{})
	charge := tool.Func{DefaultPermission: "allow", Name: "charge", Limit: tool.Limits{Timeout: time.Minute}, Run: func(ctx context.Context, c tool.Call) (string, error) {
		bodies.enter(c)
		<-ctx.Done()
		close(cancelled)
		<-release // deaf to the cancellation
		return "charged 42 EUR", nil
	}}
	defer close(release)
	m := oneToolThenAnswer("charge")
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), charge))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "pay")
	<-bodies.entered
	closed := make(chan error, 1)
	go func() { closed <- n.Inst.Close(ctx) }()
	<-cancelled
	tr.Clock.Advance(time.Minute) // the body's limit passes while it runs on
	require.NoError(t, <-closed)
	n.Crash()
	assert.Empty(t, settlements(t, tr.Events(sid)), "no result to settle")

	n2 := tr.Boot(newRunner(t, m, runner.NewConfig(), charge))
	n2.Idle()
	require.Equal(t, "succeeded", tr.PromptState(pid))
	assert.Len(t, bodies.runs(), 1, "the body ran once")
	s := settlements(t, tr.Events(sid))
	require.Len(t, s, 1)
	assert.Equal(t, event.OutcomeInterrupted, s[0].Outcome)
	assert.Equal(t, runner.UnknownOutcome, s[0].Output)
}

// A body that panics is a tool error the model reads; the turn goes on.
func TestToolPanicIsItsError(t *testing.T) {
	tr := treetest.New(t)
	boom := tool.Func{DefaultPermission: "allow", Name: "boom", Run: func(context.Context, tool.Call) (string, error) {
		panic("the floor gave way")
	}}
	m := oneToolThenAnswer("boom")
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), boom))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "try")
	n.Idle()
	require.Equal(t, "succeeded", tr.PromptState(pid))
	s := settlements(t, tr.Events(sid))
	require.Len(t, s, 1)
	assert.Equal(t, event.OutcomeError, s[0].Outcome)
	assert.Equal(t, "tool panicked: the floor gave way", s[0].Output)
}

// A body's output is kept whole up to the tool's cap and cut past it, at
// a character's start, with a line that says so.
func TestToolOutputIsCutAtTheCap(t *testing.T) {
	for out, want := range map[string]string{
		"abcd":      "abcd",
		"aéé":       "aé\n[output truncated: 3 of 5 bytes shown]",
		"abcde":     "abcd\n[output truncated: 4 of 5 bytes shown]",
		"a\u00e9bc": "a\u00e9b\n[output truncated: 4 of 5 bytes shown]",
	} {
		tr := treetest.New(t)
		say := tool.Func{DefaultPermission: "allow", Name: "say", Limit: tool.Limits{OutputCap: 4}, Run: func(context.Context, tool.Call) (string, error) {
			return out, nil
		}}
		n := tr.Boot(newRunner(t, oneToolThenAnswer("say"), runner.NewConfig(), say))
		sid := n.NewSession("s")
		n.Admit(sid, "speak")
		n.Idle()
		s := settlements(t, tr.Events(sid))
		require.Len(t, s, 1)
		assert.Equal(t, want, s[0].Output, out)
	}
}

// A body that returns a known result after an interrupt cancelled it is
// settled, and the execution stops there: the step's next call, an in-tree
// kv_put, never runs, though an in-tree tool needs no body goroutine that
// a cancelled execution would refuse to start (DESIGN §6.4: no tool body
// starts once the execution is cancelled).
func TestKnownResultAfterAnInterruptRunsNoFurtherCall(t *testing.T) {
	tr := treetest.New(t)
	bodies := newBodyLog()
	charge := tool.Func{DefaultPermission: "allow", Name: "charge", Run: func(ctx context.Context, c tool.Call) (string, error) {
		bodies.enter(c)
		<-ctx.Done()
		return "charged 42 EUR", nil
	}}
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: []model.Chunk{
				{ToolCall: &model.ToolCallDelta{Index: 0, Name: "charge", Arguments: `{}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, Name: "kv_put", Arguments: `{"key":"receipt","value":"42"}`}},
				{Finish: model.FinishToolCalls},
			}}
		}
		return scriptStep{chunks: text("done")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), charge, tool.KVPut()))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "pay, then note the receipt")
	<-bodies.entered
	did, err := n.Inst.Interrupt(ctx, sid, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	n.Idle()

	require.Equal(t, "interrupted", tr.PromptState(pid))
	s := settlements(t, tr.Events(sid))
	require.Len(t, s, 1, "only charge, whose body returned, is settled")
	assert.Equal(t, "charged 42 EUR", s[0].Output)
	var stored bool
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT EXISTS (SELECT 1 FROM kv WHERE key = 'receipt')`, nil, &stored)
		return err
	})
	assert.False(t, stored, "kv_put did not run after the interrupt")
}
