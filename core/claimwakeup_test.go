package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A reply that resolves its step's last blocker takes the session's claim
// for the continuation, and a claim commits only with a wake-up armed
// (DESIGN §4 rule 1, §9): the admission's wake-up may long have been used
// up, and a kill right after the reply's commit, before the continuation
// wrote anything, leaves only the wake-up to resume the turn. Armed by
// nothing but the reply (the fake waker is never cleared), it must be
// set once the reply returns.
func TestReplyThatClaimsArmsTheWakeup(t *testing.T) {
	p := parkOn(t, "q")
	p.tr.Wake.Take() // the admission's wake-up, delivered while the turn was parked

	_, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, answer("r1", "red"))
	require.NoError(t, err)
	p.nextStart(t, "the continuation")
	assert.NotZero(t, p.tr.Wake.At(), "the reply's claim committed with a wake-up armed")
}

// An admitted prompt's claim commits with a wake-up armed (DESIGN §4 rule
// 1, §15 "prompt outside the claim"): a kill right after the 202 finds
// it. Without it, recovery's test of a wake between the arm and the
// commit waits forever for an arm that never comes.
func TestAdmissionThatClaimsArmsTheWakeup(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(1)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	tr.Wake.Take() // whatever creating the session armed

	n.Admit(sid, "hold")
	<-d.Started
	assert.NotZero(t, tr.Wake.At(), "the admission's claim committed with a wake-up armed")
	d.Release()
	n.Idle()
}

// A sub-agent's claim, taken with its job by the parent's execution, commits
// with a wake-up armed too (StartChild: "Wake rule 1, as in Admit"): killed
// right after, the child's turn is resumed only by the wake-up.
func TestSubAgentsClaimArmsTheWakeup(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("root")
	n.Admit(sid, "hold")
	rx := <-d.Started
	tr.Wake.Take() // the admission's wake-up, delivered while the turn ran

	_, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "hold", MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	<-d.Started
	assert.NotZero(t, tr.Wake.At(), "the child's claim committed with a wake-up armed")
	d.Release()
	n.Idle()
}
