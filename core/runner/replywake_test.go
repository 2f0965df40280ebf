package runner_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// The Reply version of TestWakeBetweenArmAndClaimCommitEndsRearmed (wake
// rule 1, DESIGN §15): the Reply that resolves a parked step's last
// blocker takes the claim, so it must arm the wake-up before that claim
// commits. The wake-up is delivered right after being armed, before the
// commit: its handler's sweep sees no claim, and its last act (Rearm) waits
// for the claim lock, so it finds the committed claim and arms again. A kill
// right after the commit then leaves a claim that a wake-up covers, and
// delivering it runs the turn to its end.
func TestReplyWakeBetweenArmAndClaimCommitEndsRearmed(t *testing.T) {
	tr := treetest.New(t)
	var hold atomic.Bool // step 2 stalls on the first instance
	hold.Store(true)
	continued := make(chan struct{})
	var once sync.Once
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall(tool.QuestionName, colourQuestion)}
		}
		if hold.Load() {
			once.Do(func() { close(continued) })
			return scriptStep{stall: true}
		}
		return scriptStep{chunks: text("painted")}
	}}
	boot := func() *treetest.Node { return tr.Boot(newRunner(t, m, runner.NewConfig(), tool.QuestionTool())) }

	n := boot()
	sid := n.NewSession("s")
	pid := n.Admit(sid, "paint it")
	n.Idle()
	qs := questions(t, n, sid)
	require.Len(t, qs, 1)
	require.False(t, tr.Claim(sid).Exists, "a parked session holds no claim")
	tr.Wake.Take() // admission's wake-up is used up: only Reply's can cover the claim

	armed := make(chan bool, 1) // whether the claim existed when the wake-up was armed
	handlerDone := make(chan struct{})
	tr.Wake.OnArm(func(int64) {
		tr.Wake.OnArm(nil)
		armed <- tr.Claim(sid).Exists
		require.True(t, tr.Wake.Take(), "delivered right after being armed")
		rep, err := recovery.Sweep(ctx, n.Inst)
		require.NoError(t, err)
		assert.Empty(t, rep.Decisions, "the claim is not committed yet")
		go func() {
			defer close(handlerDone)
			_, err := n.Inst.Rearm(ctx) // the handler's last act waits for the claim lock
			assert.NoError(t, err)
		}()
	})
	res, err := n.Inst.Reply(ctx, sid, qs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"red"}}})
	require.NoError(t, err)
	assert.False(t, res.Duplicate)
	require.True(t, tr.Claim(sid).Exists, "the reply took the claim")
	select {
	case before := <-armed:
		assert.False(t, before, "the wake-up was armed before the claim committed")
	default:
		tr.Wake.OnArm(nil)
		require.Fail(t, "the reply took the claim without arming a wake-up first")
	}
	<-continued // the continuation runs here (cause resolution)
	<-handlerDone
	n.Crash() // killed right after the commit: only the wake-up can bring the turn back

	require.True(t, tr.Claim(sid).Exists)
	require.NotZero(t, tr.Wake.At(), "the claim has a wake-up")

	// Delivering it boots a fresh instance that finishes the turn.
	require.True(t, tr.Wake.Take())
	hold.Store(false)
	n2 := boot()
	n2.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid))
	assert.False(t, tr.Claim(sid).Exists)
	assert.Equal(t, 1, startedWith(t, tr.Events(sid), event.CauseResolution))
}

// Wake rule 1 (DESIGN §4) for an interrupt: interrupting a child parked on
// its question ends its task turn, and that commit resolves the parked
// parent's waiting call with the parent's claim (resolveTask), though the
// child held none. So the interrupt arms the wake-up before its commit: a
// kill right after the commit leaves the parent's claim covered by a
// wake-up, and delivering it runs the parent's continuation to its end.
func TestInterruptOfParkedChildArmsBeforeParentClaimCommits(t *testing.T) {
	tr := treetest.New(t)
	n, _ := askingChild(t, tr, offline.New(nil, offline.Options{}))
	require.False(t, tr.Claim("root").Exists, "the parent is parked, holding no claim")
	require.False(t, tr.Claim("root.1").Exists, "the child is parked, holding no claim")
	tr.Wake.Take() // earlier wake-ups are used up: only the interrupt's can cover the claim

	var mu sync.Mutex
	var claimedAtArm []bool // whether the parent's claim existed at each arm
	tr.Wake.OnArm(func(int64) {
		c := tr.Claim("root").Exists
		mu.Lock()
		claimedAtArm = append(claimedAtArm, c)
		mu.Unlock()
	})
	n.Kill.KillAt(1, true) // the interrupt commits, then the instance dies
	_, _ = n.Inst.Interrupt(ctx, "root.1", event.ReasonUser)
	<-n.Kill.Died()
	n.Crash()
	tr.Wake.OnArm(nil)

	require.True(t, tr.Claim("root").Exists, "the interrupt's commit gave the parent a claim")
	mu.Lock()
	arms := append([]bool(nil), claimedAtArm...)
	mu.Unlock()
	require.NotEmpty(t, arms, "the interrupt armed no wake-up")
	assert.False(t, arms[0], "the wake-up was armed before the claim committed")
	require.NotZero(t, tr.Wake.At(), "the parent's claim has a wake-up")

	// Delivering it boots an instance that continues the parent.
	require.True(t, tr.Wake.Take())
	n2 := tr.Boot(taskRunner(t, tr, offline.New(nil, offline.Options{}), runner.NewConfig(), tool.QuestionTool()))
	n2.Idle()
	evs := tr.Events("root")
	terms := treetest.Terminals(evs)
	require.Len(t, terms, 1)
	assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
	assert.Equal(t, 1, startedWith(t, evs, event.CauseResolution))
	noClaims(t, tr)
}
