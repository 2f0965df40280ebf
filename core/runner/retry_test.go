package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// failingModel fails the first `fails` requests with err, then answers.
type failingModel struct {
	scriptModel
	fails int
	err   error
}

func (m *failingModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	if m.fails > 0 {
		m.fails--
		m.mu.Unlock()
		return nil, m.err
	}
	m.mu.Unlock()
	return m.scriptModel.Stream(ctx, req)
}

var rateLimited = &model.Error{Status: 429, Retryable: true, RetryAfter: 7 * time.Second, Msg: "slow down"}

// A 429 with Retry-After puts the turn to sleep durably: retry.scheduled
// with the time, the claim kept with retry_at. Killed during the sleep, the
// next boot neither counts a resume nor retries early; the retry happens at
// the recorded time.
func TestRetryScheduledSurvivesKillWithoutCountingResume(t *testing.T) {
	tr := treetest.New(t)
	m := &failingModel{fails: 1, err: rateLimited, scriptModel: scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: text("finally")} }}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hello")
	n.Idle()
	retries := treetest.OfType(tr.Events(sid), event.RetryScheduled)
	require.Len(t, retries, 1)
	var r event.Retry
	require.NoError(t, retries[0].Decode(&r))
	due := int64(treetest.Start) + 7000
	assert.Equal(t, due, r.At, "the provider's Retry-After")
	assert.Equal(t, 1, r.Attempt)
	assert.Equal(t, "running", tr.PromptState(pid))
	assert.True(t, tr.Claim(sid).Exists, "the claim stays while the turn sleeps")
	assert.Equal(t, due, tr.Wake.At(), "the wake-up is armed for the retry")
	n.Crash()

	// Booted before the retry is due: it sleeps, counting nothing.
	tr.Clock.Advance(3 * time.Second)
	n = tr.Boot(newRunner(t, m, runner.NewConfig()))
	assert.Equal(t, 1, n.Report.Count(core.Sleep))
	n.Idle()
	assert.Equal(t, due, tr.Wake.At())
	assert.Equal(t, 0, m.Requests(1), "no early retry")

	// The wake-up fires at the recorded time and the retry runs.
	tr.Clock.Set(due)
	require.True(t, tr.Wake.Take())
	rep, err := recovery.Wake(context.Background(), n.Inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Start))
	n.Idle()
	evs := tr.Events(sid)
	assert.Empty(t, treetest.OfType(evs, event.ExecutionResumed), "no resume attempt counted")
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	starts := treetest.OfType(evs, event.ExecutionStarted)
	var last event.Started
	require.NoError(t, starts[len(starts)-1].Decode(&last))
	assert.Equal(t, event.CauseRetry, last.Cause)
}

// A Retry-After with a part of a millisecond is waited in full: the retry
// is scheduled at the next whole ms (the host clock's unit), never before
// the wait the provider asked for has passed.
func TestRetryWaitRoundsUpToTheMillisecond(t *testing.T) {
	for _, after := range []time.Duration{500 * time.Microsecond, 8007*time.Millisecond + 999999} {
		tr := treetest.New(t)
		m := &failingModel{fails: 1, err: &model.Error{Status: 429, Retryable: true, RetryAfter: after, Msg: "slow down"},
			scriptModel: scriptModel{steps: func(int) scriptStep { return scriptStep{stall: true} }}}
		n := tr.Boot(newRunner(t, m, runner.NewConfig()))
		sid := n.NewSession("s")
		n.Admit(sid, "hello")
		n.Idle()
		retries := treetest.OfType(tr.Events(sid), event.RetryScheduled)
		require.Len(t, retries, 1)
		var r event.Retry
		require.NoError(t, retries[0].Decode(&r))
		want := int64(treetest.Start) + int64((after+time.Millisecond-1)/time.Millisecond)
		assert.Equal(t, want, r.At, "Retry-After %s", after)
		assert.GreaterOrEqual(t, time.Duration(r.At-int64(treetest.Start))*time.Millisecond, after)
		n.Crash()
	}
}

// Rearm arms for the earliest thing due: a claim sleeping on a retry wakes
// at its retry time, every other claim no later than one wake interval from
// now. With a retry 10 min away and an ordinary claim the wake-up is one
// interval away; with the retry due sooner than the interval, at the retry
// (DESIGN §4 rule 3).
func TestRearmArmsTheEarlierOfRetryAndInterval(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration
		retry bool // the wake-up is at the retry, not one interval away
	}{{"retry-later", 10 * time.Minute, false}, {"retry-sooner", 3 * time.Second, true}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Less(t, 3*time.Second, core.DefaultWakeInterval)
			tr, n := sleepingOnRetry(t, tc.after)
			retryAt := int64(treetest.Start) + tc.after.Milliseconds()

			busy := n.NewSession("busy")
			n.Admit(busy, "hello") // its model call stalls: an ordinary claim
			require.True(t, tr.Claim(busy).Exists)
			at, err := n.Inst.Rearm(ctx)
			require.NoError(t, err)
			want := tr.Clock.Now() + core.DefaultWakeInterval.Milliseconds()
			if tc.retry {
				want = retryAt
			}
			assert.Equal(t, want, at)
			assert.Equal(t, want, tr.Wake.At())
			n.Crash()
		})
	}
}

// While sweeps fail in a row, Rearm waits out the wake schedule: after
// three failed sweeps, no earlier than retry.Wake().Delay(2) (4 s) from now.
// A retry due sooner waits for it too (its start is a write, which the
// storage refusing the sweeps would refuse as well); a retry due later
// still wakes at its own time.
func TestRearmAfterFailedSweepsWaitsOutTheBackoff(t *testing.T) {
	backoff := retry.Wake().Delay(2)
	for _, tc := range []struct {
		name  string
		after time.Duration
		retry bool // the wake-up is at the retry, not at the backoff's end
	}{{"retry-later", 10 * time.Minute, true}, {"retry-sooner", 3 * time.Second, false}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.retry, tc.after > backoff)
			tr, n := sleepingOnRetry(t, tc.after)
			for range 3 {
				n.Inst.Swept(errors.New("storage refused the sweep"))
			}
			at, err := n.Inst.Rearm(ctx)
			require.NoError(t, err)
			want := tr.Clock.Now() + backoff.Milliseconds()
			if tc.retry {
				want = int64(treetest.Start) + tc.after.Milliseconds()
			}
			assert.Equal(t, want, at)

			n.Inst.Swept(nil) // a sweep that succeeded ends the backoff
			tr.Wake.Take()
			at, err = n.Inst.Rearm(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(treetest.Start)+tc.after.Milliseconds(), at, "at the retry again")
			n.Crash()
		})
	}
}

// The backoff starts with the first failed sweep: a retry due sooner than
// retry.Wake().Delay(0) (1 s) after it waits that long, as the host's own
// retry of the failed sweep does.
func TestRearmAfterOneFailedSweepWaitsTheFirstDelay(t *testing.T) {
	after := 500 * time.Millisecond
	require.Less(t, after, retry.Wake().Delay(0))
	tr, n := sleepingOnRetry(t, after)
	n.Inst.Swept(errors.New("storage refused the sweep"))
	at, err := n.Inst.Rearm(ctx)
	require.NoError(t, err)
	assert.Equal(t, tr.Clock.Now()+retry.Wake().Delay(0).Milliseconds(), at)
	n.Crash()
}

// sleepingOnRetry boots a tree whose session "sleepy" sleeps on a retry
// due after (the provider's 429 asked for that wait); its model stalls
// every step after.
func sleepingOnRetry(t *testing.T, after time.Duration) (*treetest.Tree, *treetest.Node) {
	t.Helper()
	tr := treetest.New(t)
	m := &failingModel{fails: 1, err: &model.Error{Status: 429, Retryable: true, RetryAfter: after, Msg: "slow down"},
		scriptModel: scriptModel{steps: func(int) scriptStep { return scriptStep{stall: true} }}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sleepy := n.NewSession("sleepy")
	n.Admit(sleepy, "hello")
	n.Idle()
	require.Len(t, treetest.OfType(tr.Events(sleepy), event.RetryScheduled), 1, "the turn sleeps on a retry")
	return tr, n
}

// queuedFailModel fails its requests in order with errs, one each, then
// answers.
type queuedFailModel struct {
	scriptModel
	errs []error
}

func (m *queuedFailModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	if len(m.errs) > 0 {
		err := m.errs[0]
		m.errs = m.errs[1:]
		m.mu.Unlock()
		return nil, err
	}
	m.mu.Unlock()
	return m.scriptModel.Stream(ctx, req)
}

// With only claims sleeping on retries, the wake-up is armed for the
// earliest retry, not the latest: two turns sleeping until T2 and then
// until T1 < T2 wake at T1, and after T1's retry ran, no later than T2
// (DESIGN §4 rule 3).
func TestRearmArmsTheEarliestOfSeveralRetries(t *testing.T) {
	tr := treetest.New(t)
	later := &model.Error{Status: 429, Retryable: true, RetryAfter: 20 * time.Second, Msg: "slow down"}
	sooner := &model.Error{Status: 429, Retryable: true, RetryAfter: 5 * time.Second, Msg: "slow down"}
	m := &queuedFailModel{errs: []error{later, sooner},
		scriptModel: scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: text("done")} }}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	a := n.NewSession("a")
	pa := n.Admit(a, "hello")
	n.Idle()
	b := n.NewSession("b")
	pb := n.Admit(b, "hello")
	n.Idle()
	require.Len(t, treetest.OfType(tr.Events(a), event.RetryScheduled), 1, "a sleeps on a retry")
	require.Len(t, treetest.OfType(tr.Events(b), event.RetryScheduled), 1, "b sleeps on a retry")
	t1 := int64(treetest.Start) + sooner.RetryAfter.Milliseconds()
	t2 := int64(treetest.Start) + later.RetryAfter.Milliseconds()

	at, err := n.Inst.Rearm(ctx)
	require.NoError(t, err)
	assert.Equal(t, t1, at, "Rearm arms the earlier retry (b's), not the later (a's)")
	assert.Equal(t, t1, tr.Wake.At())

	tr.Clock.Set(t1)
	require.True(t, tr.Wake.Take())
	rep, err := recovery.Wake(context.Background(), n.Inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Start), "only b's retry is due")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pb))
	assert.Equal(t, "running", tr.PromptState(pa), "a still sleeps")
	assert.NotZero(t, tr.Wake.At(), "a's retry still needs a wake-up")
	assert.LessOrEqual(t, tr.Wake.At(), t2, "armed no later than a's retry")
	n.Crash()
}

// A retry already due that no sweep started (its sweep met a failing
// disk) is re-armed one wake interval ahead, like a claim not sleeping,
// never at its own time in the past: that would deliver the wake-up again
// at once, over and over, ahead of the host's backoff for a failed sweep
// (the simulator's wake-not-hot, seed 2). A retry still ahead is armed at
// its time.
func TestRearmNeverArmsADueRetryInThePast(t *testing.T) {
	tr := treetest.New(t)
	wait := &model.Error{Status: 429, Retryable: true, RetryAfter: 5 * time.Second, Msg: "slow down"}
	m := &queuedFailModel{errs: []error{wait},
		scriptModel: scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: text("done")} }}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	a := n.NewSession("a")
	pa := n.Admit(a, "hello")
	n.Idle()
	due := int64(treetest.Start) + wait.RetryAfter.Milliseconds()

	at, err := n.Inst.Rearm(ctx)
	require.NoError(t, err)
	assert.Equal(t, due, at, "a retry ahead is armed at its time")

	tr.Clock.Set(due + 3000) // the wake-up came; its sweep could not start the retry
	require.True(t, tr.Wake.Take())
	at, err = n.Inst.Rearm(ctx)
	require.NoError(t, err)
	assert.Equal(t, due+3000+core.DefaultWakeInterval.Milliseconds(), at, "a due retry is re-armed one interval ahead, not in the past")

	rep, err := recovery.Wake(context.Background(), n.Inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Start), "the next sweep starts it")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pa))
	n.Crash()
}

// Retries are bounded: past the configured count the turn fails.
func TestRetriesExhaustedFailTheTurn(t *testing.T) {
	tr := treetest.New(t)
	m := &failingModel{fails: 100, err: &model.Error{Status: 503, Retryable: true, Msg: "overloaded"}}
	cfg := runner.NewConfig().WithRetries(2, time.Second, time.Minute)
	n := tr.Boot(newRunner(t, m, cfg))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hello")
	n.Idle()
	for range 2 {
		tr.Clock.Set(tr.Wake.At())
		require.True(t, tr.Wake.Take())
		_, err := recovery.Wake(context.Background(), n.Inst)
		require.NoError(t, err)
		n.Idle()
	}
	evs := tr.Events(sid)
	var delays []int64
	prev := int64(treetest.Start)
	for _, e := range treetest.OfType(evs, event.RetryScheduled) {
		var r event.Retry
		require.NoError(t, e.Decode(&r))
		delays = append(delays, r.At-prev)
		prev = r.At
	}
	assert.Equal(t, []int64{1000, 2000}, delays, "backoff doubles from the initial delay")
	var f event.Failed
	fails := treetest.OfType(evs, event.ExecutionFailed)
	require.Len(t, fails, 1)
	require.NoError(t, fails[0].Decode(&f))
	assert.Equal(t, event.FailModel, f.Type)
	assert.Contains(t, f.Message, "gave up after 2 retries")
	assert.Equal(t, "failed", tr.PromptState(pid))
}

// With no retries the delays are never waited, so a runner takes them in
// any order (a file may say model_retries 0 and keep a retry_initial above
// the default retry_max); with retries, initial must be at most max.
func TestNoRetriesTakeAnyDelays(t *testing.T) {
	m := offline.New(nil, offline.Options{})
	_, err := runner.New(m, tool.Registry{}, runner.NewConfig().WithRetries(0, time.Hour, time.Minute))
	require.NoError(t, err)
	_, err = runner.New(m, tool.Registry{}, runner.NewConfig().WithRetries(1, time.Hour, time.Minute))
	require.ErrorContains(t, err, "initial at most max")
}

// A request retried after a provider failure is the same step: retries do
// not count against the step cap (DESIGN §6.6, §12). With a cap of 2, three
// 429s before the first step and a final answer as the second step still
// end the turn successfully.
func TestProviderRetriesDoNotCountAgainstStepCap(t *testing.T) {
	tr := treetest.New(t)
	l := newLedger()
	m := &failingModel{fails: 3, err: rateLimited, scriptModel: scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall("act", `{}`)}
		}
		return scriptStep{chunks: text("done")}
	}}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig().WithStepCap(2), l.tool("act", true)))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hello")
	n.Idle()
	for i := range 3 {
		tr.Clock.Set(tr.Wake.At())
		require.True(t, tr.Wake.Take(), "retry %d is scheduled", i+1)
		_, err := recovery.Wake(context.Background(), n.Inst)
		require.NoError(t, err)
		n.Idle()
	}
	require.Equal(t, "succeeded", tr.PromptState(pid))
	evs := tr.Events(sid)
	assert.Len(t, treetest.OfType(evs, event.RetryScheduled), 3)
	assert.Len(t, treetest.OfType(evs, event.StepStarted), 5, "three failed requests, then two steps")
	assert.Equal(t, 1, l.count("act"))
}

// stepFailModel fails the first fails[k] requests of step k (the scripted
// model's step: one more than the tool results in the request) with err,
// then answers.
type stepFailModel struct {
	scriptModel
	fails map[int]int
	err   error
}

func (m *stepFailModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	k := 1
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool {
			k++
		}
	}
	m.mu.Lock()
	if m.fails[k] > 0 {
		m.fails[k]--
		m.mu.Unlock()
		return nil, m.err
	}
	m.mu.Unlock()
	return m.scriptModel.Stream(ctx, req)
}

// The retry budget is per step: a completed step gives the turn's next
// step the full budget again (docs/RATIONALE.md: "the retries of one step
// are counted"). With two retries allowed, step 1 spends both and
// completes with a tool call; step 2 then fails twice more and still gets
// both its retries, counted from 1, and the turn succeeds.
func TestCompletedStepRestoresTheRetryBudget(t *testing.T) {
	tr := treetest.New(t)
	l := newLedger()
	m := &stepFailModel{fails: map[int]int{1: 2, 2: 2}, err: &model.Error{Status: 503, Retryable: true, Msg: "overloaded"},
		scriptModel: scriptModel{steps: func(k int) scriptStep {
			if k == 1 {
				return scriptStep{chunks: toolCall("act", `{}`)}
			}
			return scriptStep{chunks: text("done")}
		}}}
	cfg := runner.NewConfig().WithRetries(2, time.Second, time.Minute)
	n := tr.Boot(newRunner(t, m, cfg, l.tool("act", true)))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "hello")
	n.Idle()
	for i := range 4 {
		require.Equal(t, "running", tr.PromptState(pid), "before retry %d", i+1)
		tr.Clock.Set(tr.Wake.At())
		require.True(t, tr.Wake.Take(), "retry %d is scheduled", i+1)
		_, err := recovery.Wake(context.Background(), n.Inst)
		require.NoError(t, err)
		n.Idle()
	}
	evs := tr.Events(sid)
	assert.Empty(t, treetest.OfType(evs, event.ExecutionFailed), "step 2 was not refused for step 1's retries")
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	var attempts []int
	for _, e := range treetest.OfType(evs, event.RetryScheduled) {
		var r event.Retry
		require.NoError(t, e.Decode(&r))
		attempts = append(attempts, r.Attempt)
	}
	assert.Equal(t, []int{1, 2, 1, 2}, attempts, "step 2's retries count from 1")
	assert.Equal(t, 1, l.count("act"))
}

// kv_put's effect commits with its settlement and kv_get reads it back.
func TestKVToolsCommitWithSettlement(t *testing.T) {
	tr := treetest.New(t)
	m := &scriptModel{steps: func(k int) scriptStep {
		switch k {
		case 1:
			return scriptStep{chunks: toolCall("kv_put", `{"key":"colour","value":"green"}`)}
		case 2:
			return scriptStep{chunks: toolCall("kv_get", `{"key":"colour"}`)}
		case 3:
			return scriptStep{chunks: toolCall("kv_get", `{"key":"missing"}`)}
		}
		return scriptStep{chunks: text("done")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), tool.KVGet(), tool.KVPut()))
	sid := n.NewSession("s")
	n.Admit(sid, "remember")
	n.Idle()
	var outs []event.Settled
	for _, e := range treetest.OfType(tr.Events(sid), event.ToolSettled) {
		var s event.Settled
		require.NoError(t, e.Decode(&s))
		outs = append(outs, s)
	}
	require.Len(t, outs, 3)
	assert.Equal(t, []event.KVPut{{Key: "colour", Value: "green"}}, outs[0].KVPuts)
	assert.Equal(t, "green", outs[1].Output)
	assert.Equal(t, event.OutcomeError, outs[2].Outcome)
	assert.Contains(t, outs[2].Output, `no value is stored under "missing"`)
	for i, s := range outs {
		assert.True(t, s.Ran, "settlement %d: the body ran, its error is its result", i)
	}
	assert.Empty(t, treetest.OfType(tr.Events(sid), event.ToolExecuting), "in-tree tools need no executing phase")
	var value string
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT value FROM kv WHERE key = 'colour'`, nil, &value)
		return err
	})
	assert.Equal(t, "green", value)
}

// When the transcript nears the context size, the oldest tool outputs are
// elided with a marker, newest kept.
func TestOldestToolOutputsElided(t *testing.T) {
	tr := treetest.New(t)
	big := tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true, Limit: tool.Limits{OutputCap: 1 << 20}, Run: func(_ context.Context, c tool.Call) (string, error) {
		return strings.Repeat("z", 3000), nil
	}}
	m := &scriptModel{steps: func(k int) scriptStep {
		if k <= 3 {
			return scriptStep{chunks: toolCall("big", fmt.Sprintf(`{"n":%d}`, k))}
		}
		return scriptStep{chunks: text("done")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig().WithContextBytes(7000), big))
	sid := n.NewSession("s")
	n.Admit(sid, "fill the context")
	n.Idle()
	tools := toolTexts(m.lastReq)
	require.Len(t, tools, 3)
	assert.Equal(t, fmt.Sprintf(runner.ElidedMarker, 3000), tools[0], "the oldest output is elided")
	assert.Len(t, tools[2], 3000, "the newest is kept")
	assert.Equal(t, "succeeded", tr.PromptState(promptID(t, tr, sid)))
}

// An output shorter than the elision marker is never elided: replacing it
// would lengthen the request and lose the output for nothing, so elision
// passes over it to the next older output that is longer.
func TestToolOutputShorterThanTheMarkerKept(t *testing.T) {
	tr := treetest.New(t)
	tiny := tool.Func{DefaultPermission: "allow", Name: "tiny", IsIdempotent: true, Run: func(_ context.Context, c tool.Call) (string, error) {
		return "ok", nil
	}}
	big := tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true, Limit: tool.Limits{OutputCap: 1 << 20}, Run: func(_ context.Context, c tool.Call) (string, error) {
		return strings.Repeat("z", 3000), nil
	}}
	m := &scriptModel{steps: func(k int) scriptStep {
		switch {
		case k == 1:
			return scriptStep{chunks: toolCall("tiny", `{}`)}
		case k <= 4:
			return scriptStep{chunks: toolCall("big", fmt.Sprintf(`{"n":%d}`, k))}
		}
		return scriptStep{chunks: text("done")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig().WithContextBytes(7000), tiny, big))
	sid := n.NewSession("s")
	n.Admit(sid, "fill the context")
	n.Idle()
	tools := toolTexts(m.lastReq)
	require.Len(t, tools, 4)
	assert.Equal(t, "ok", tools[0], "an output shorter than the marker is kept")
	assert.Equal(t, fmt.Sprintf(runner.ElidedMarker, 3000), tools[1], "the oldest longer output is elided in its place")
	assert.Len(t, tools[3], 3000, "the newest is kept")
	assert.Equal(t, "succeeded", tr.PromptState(promptID(t, tr, sid)))
}

// The kv store is tree-wide: its rebuild from the log must replay writes of
// different sessions in the order they committed.
func TestKVRebuildFollowsCommitOrderAcrossSessions(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(newRunner(t, offline.New(tr.Clock, offline.Options{}), runner.NewConfig(), tool.KVPut()))
	n.NewSession("b")
	n.NewSession("a")
	n.Admit("b", `/tool kv_put {"key":"k","value":"first"}`+"\nok")
	n.Idle()
	n.Admit("a", `/tool kv_put {"key":"k","value":"second"}`+"\nok")
	n.Idle()
	read := func() (v string) {
		tr.Read(func(tx storage.Tx) error {
			_, err := storage.QueryRow(tx, `SELECT value FROM kv WHERE key = 'k'`, nil, &v)
			return err
		})
		return v
	}
	require.Equal(t, "second", read())
	tr.Read(core.Rebuild)
	assert.Equal(t, "second", read(), "the rebuild reproduces the live store")
}

// pairPut is an in-tree tool whose one call writes two keys: an embedder's
// tool may put several, and each is applied with the settlement.
type pairPut struct{ tool.InTree }

func (pairPut) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "pair_put", Schema: json.RawMessage(`{"type":"object"}`)}
}

func (pairPut) Resources(json.RawMessage) ([]string, error) {
	return []string{"kv:left", "kv:right"}, nil
}

func (pairPut) RunInTree(tool.Store, tool.Call) (string, []event.KVPut, error) {
	return "stored both", []event.KVPut{{Key: "left", Value: "1"}, {Key: "right", Value: "2"}}, nil
}

// Every put of an in-tree call lands in the store with its settlement, and
// a rebuild reproduces them all.
func TestInTreeCallAppliesEveryPut(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(newRunner(t, offline.New(tr.Clock, offline.Options{}), runner.NewConfig(), pairPut{tool.KVPut()}))
	sid := n.NewSession("s")
	pid := n.Admit(sid, "/tool pair_put {}")
	n.Idle()
	require.Equal(t, "succeeded", tr.PromptState(pid))
	read := func() map[string]string { return pairsOf(tr, `SELECT key, value FROM kv`) }
	want := map[string]string{"left": "1", "right": "2"}
	assert.Equal(t, want, read())
	tr.Read(core.Rebuild)
	assert.Equal(t, want, read(), "the rebuild reproduces both")
}

// A Sleep decision arms the wake-up for the retry's own time (core.Sleep),
// whoever applies it: a sweep on its own, without Wake's re-arm after it,
// leaves the wake-up at the retry, not later.
func TestSleepDecisionArmsTheRetryTime(t *testing.T) {
	tr := treetest.New(t)
	m := &failingModel{fails: 1, err: rateLimited, scriptModel: scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: text("finally")} }}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig()))
	sid := n.NewSession("s")
	n.Admit(sid, "hello")
	n.Idle()
	due := int64(treetest.Start) + rateLimited.RetryAfter.Milliseconds()
	require.Len(t, treetest.OfType(tr.Events(sid), event.RetryScheduled), 1)

	tr.Clock.Advance(3 * time.Second)
	require.True(t, tr.Wake.Take(), "the wake-up is used up, early")
	rep, err := recovery.Sweep(context.Background(), n.Inst)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Count(core.Sleep))
	assert.Equal(t, due, tr.Wake.At(), "armed for the retry")
	n.Crash()
}
