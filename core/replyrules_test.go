package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// These tests pin Instance.Reply's rules as an embedder calling core sees
// them (no HTTP route in front): which path and kind find a blocker, what
// a repeated reply gets, when a reply starts the continuation, and what a
// reply that ends the turn leaves behind.

// parkDriver parks a turn, in one step, on the blockers its prompt names,
// one a word: "q" a question with the choices red and green, "p" a
// permission request. The continuation of a parked turn answers at once.
// Every run is announced on started.
type parkDriver struct{ started chan *core.Execution }

func (d parkDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.started <- x
	if x.Cause() != event.CausePrompt {
		return treetest.Answer(ctx, x)
	}
	park := &event.Parked{StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID()}
	for i, kind := range strings.Fields(x.Prompt()) {
		call := fmt.Sprintf("%s.call%d", x.ID(), i)
		b := event.Blocker{ID: core.BlockerID("q", call, 0), Kind: event.KindQuestion, CallID: call, Adapter: tool.QuestionAdapter,
			Request: json.RawMessage(`{"questions":[{"question":"which colour?","choices":["red","green"]}]}`)}
		if kind == "p" {
			b = event.Blocker{ID: core.BlockerID("p", call, 0), Kind: event.KindPermission, CallID: call, Adapter: core.PermissionAdapter,
				Request: json.RawMessage(`{"action":"kv_put","resources":["kv:secret"],"arguments":{}}`)}
		}
		park.Blockers = append(park.Blockers, b)
	}
	return core.Outcome{Kind: core.Parked, Park: park}
}

// parked is a session whose one turn waits on the blockers of one step.
type parked struct {
	tr       *treetest.Tree
	n        *treetest.Node
	d        parkDriver
	pid      string
	blockers []core.Blocker // in the order the prompt named them
}

// parkOn admits kinds (parkDriver's words) to a new session "s" and waits
// for its turn to park.
func parkOn(t *testing.T, kinds string) parked {
	t.Helper()
	tr := treetest.New(t)
	d := parkDriver{started: make(chan *core.Execution, 4)}
	n := tr.Boot(d)
	n.NewSession("s")
	pid := n.Admit("s", kinds)
	<-d.started
	n.Idle()
	bs, err := n.Inst.Blockers(ctx, "s", "")
	require.NoError(t, err)
	require.Len(t, bs, len(strings.Fields(kinds)))
	require.Equal(t, "running", tr.PromptState(pid), "a parked turn")
	return parked{tr: tr, n: n, d: d, pid: pid, blockers: bs}
}

// pending lists the ids of the session's pending blockers.
func (p parked) pending(t *testing.T) []string {
	t.Helper()
	bs, err := p.n.Inst.Blockers(ctx, "s", "")
	require.NoError(t, err)
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	return ids
}

// noStart checks that no execution started since the park.
func (p parked) noStart(t *testing.T) {
	t.Helper()
	p.n.Idle()
	select {
	case x := <-p.d.started:
		require.Fail(t, "an execution started", "cause %s", x.Cause())
	default:
	}
}

// nextStart is the next execution started: by the instance itself, as
// the wake-up is never delivered here.
func (p parked) nextStart(t *testing.T, what string) *core.Execution {
	t.Helper()
	select {
	case x := <-p.d.started:
		return x
	case <-time.After(30 * time.Second): // only to fail instead of hanging
		require.Fail(t, what+" did not start")
		return nil
	}
}

// conflict is the winner a reply refused as a conflict was shown.
func conflict(t *testing.T, err error) core.Resolution {
	t.Helper()
	var c *core.ReplyConflict
	require.ErrorAs(t, err, &c)
	assert.ErrorIs(t, err, core.ErrConflict)
	return c.Winner
}

func answer(id, colour string) core.Reply {
	return core.Reply{Kind: event.KindQuestion, ResponseID: id, Answers: [][]string{{colour}}}
}

// A reply gives one answer list per question: a list too many is refused
// as a list too few is, with nothing written.
func TestReplyWithAnAnswerListPerQuestionOnly(t *testing.T) {
	p := parkOn(t, "q")
	q := p.blockers[0].ID
	for name, answers := range map[string][][]string{
		"a list too many": {{"red"}, {"green"}},
		"no list":         {},
	} {
		_, err := p.n.Inst.Reply(ctx, "s", q, core.Reply{Kind: event.KindQuestion, ResponseID: "r-" + name, Answers: answers})
		assert.ErrorIs(t, err, core.ErrInvalid, name)
	}
	assert.Equal(t, []string{q}, p.pending(t), "nothing was written")
	p.noStart(t)

	res, err := p.n.Inst.Reply(ctx, "s", q, answer("r1", "red"))
	require.NoError(t, err)
	assert.Equal(t, core.BlockerAnswered, res.State)
}

// First response wins, and the same response_id is an idempotency key: the
// same body again is a duplicate answered with the original outcome; the
// same id with another body, like another id, is a conflict showing the
// winner.
func TestReplyRepeatedIsADuplicateOnlyWithTheSameBody(t *testing.T) {
	p := parkOn(t, "q")
	q := p.blockers[0].ID
	first, err := p.n.Inst.Reply(ctx, "s", q, answer("r1", "green"))
	require.NoError(t, err)
	require.Equal(t, core.BlockerAnswered, first.State)
	assert.False(t, first.Duplicate)

	again, err := p.n.Inst.Reply(ctx, "s", q, answer("r1", "green"))
	require.NoError(t, err)
	assert.True(t, again.Duplicate)
	again.Duplicate = false
	assert.Equal(t, first, again, "the original outcome")

	for name, r := range map[string]core.Reply{
		"the same response_id with another answer": answer("r1", "red"),
		"the same response_id with a cancel":       {Kind: event.KindQuestion, ResponseID: "r1", Cancel: true},
		"another response_id":                      answer("r2", "green"),
	} {
		_, err := p.n.Inst.Reply(ctx, "s", q, r)
		winner := conflict(t, err)
		assert.Equal(t, "r1", winner.ResponseID, name)
		assert.Equal(t, [][]string{{"green"}}, winner.Reply.Answers, name)
	}
	p.n.Idle()
	assert.Equal(t, "succeeded", p.tr.PromptState(p.pid), "the first answer's continuation")
}

// A child's question is answered on its own path or on its root's (the
// tree's one list of blockers), never on another session's.
func TestChildQuestionRepliedOnItsRootsPath(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(offlineTaskRunner(t, tr))
	n.NewSession("root")
	n.NewSession("other")
	pid := n.Admit("root", "/task /ask which colour?")
	n.Idle()
	qs, err := n.Inst.Blockers(ctx, "root", event.KindQuestion)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, "root.1", qs[0].SessionID, "the child's question")

	_, err = n.Inst.Reply(ctx, "other", qs[0].ID, answer("r0", "green"))
	assert.ErrorIs(t, err, core.ErrNotFound, "another session's path")
	res, err := n.Inst.Reply(ctx, "root", qs[0].ID, answer("r1", "green"))
	require.NoError(t, err, "the root's path")
	assert.Equal(t, core.BlockerAnswered, res.State)
	assert.Equal(t, "root.1", res.SessionID)
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(pid), "the child's answer reached its parent")
}

// A reply that names a kind finds only a blocker of that kind: a cancel
// sent as a permission's reply must not cancel a question (which would
// end the turn), nor a question's answer touch a permission request.
func TestReplyOfAnotherKindIsNotFound(t *testing.T) {
	p := parkOn(t, "q p")
	q, perm := p.blockers[0].ID, p.blockers[1].ID
	_, err := p.n.Inst.Reply(ctx, "s", q, core.Reply{Kind: event.KindPermission, ResponseID: "r1", Cancel: true})
	assert.ErrorIs(t, err, core.ErrNotFound, "a question on the permission's route")
	_, err = p.n.Inst.Reply(ctx, "s", perm, core.Reply{Kind: event.KindQuestion, ResponseID: "r2", Decision: core.ReplyOnce})
	assert.ErrorIs(t, err, core.ErrNotFound, "a permission on the question's route")
	assert.Equal(t, []string{q, perm}, p.pending(t), "nothing was written")
	assert.Equal(t, "running", p.tr.PromptState(p.pid))
	p.noStart(t)
}

// The continuation starts with the reply that resolves the step's last
// pending blocker, not before: a reply to one of two takes no claim and
// starts nothing.
func TestReplyToOneOfTwoBlockersWaitsForTheOther(t *testing.T) {
	p := parkOn(t, "q p")
	q, perm := p.blockers[0].ID, p.blockers[1].ID
	res, err := p.n.Inst.Reply(ctx, "s", q, answer("r1", "red"))
	require.NoError(t, err)
	assert.Equal(t, core.BlockerAnswered, res.State)
	p.noStart(t)
	assert.False(t, p.tr.Claim("s").Exists, "no claim while the permission waits")
	assert.Equal(t, []string{perm}, p.pending(t))
	assert.Equal(t, "running", p.tr.PromptState(p.pid))

	res, err = p.n.Inst.Reply(ctx, "s", perm, core.Reply{Kind: event.KindPermission, ResponseID: "r2", Decision: core.ReplyOnce})
	require.NoError(t, err)
	assert.Equal(t, core.BlockerApproved, res.State)
	x := p.nextStart(t, "the continuation")
	assert.Equal(t, event.CauseResolution, x.Cause())
	p.n.Idle()
	assert.Equal(t, "succeeded", p.tr.PromptState(p.pid))
}

// A cancelled question ends the turn interrupted{user}: its resolution
// says it was cancelled by the reply (also when the reply is repeated),
// and the step's other blockers are cancelled as its siblings, which a
// late reply to them is shown.
func TestCancelledQuestionEndsTheTurnAndCancelsItsSiblings(t *testing.T) {
	p := parkOn(t, "q q p")
	cancel := core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true, Message: "never mind"}
	res, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, cancel)
	require.NoError(t, err)
	assert.Equal(t, core.BlockerCancelled, res.State)
	assert.Equal(t, event.CancelReply, res.Reason)
	assert.Equal(t, "never mind", res.Reply.Message)
	again, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, cancel)
	require.NoError(t, err)
	assert.True(t, again.Duplicate)
	assert.Equal(t, event.CancelReply, again.Reason, "the duplicate's outcome")

	p.noStart(t)
	assert.Empty(t, p.pending(t))
	assert.Equal(t, "interrupted", p.tr.PromptState(p.pid))
	assert.Empty(t, treetest.OfType(p.tr.Events("s"), event.ToolSettled),
		"no call is settled: a later turn reads the cancelled question as such, not as a declined call")
	terms := treetest.Terminals(p.tr.Events("s"))
	require.Len(t, terms, 1)
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, event.ReasonUser, in.Reason)

	_, err = p.n.Inst.Reply(ctx, "s", p.blockers[1].ID, answer("r2", "red"))
	winner := conflict(t, err)
	assert.Equal(t, core.BlockerCancelled, winner.State)
	assert.Equal(t, event.CancelSibling, winner.Reason, "the other question")
	assert.Empty(t, winner.ResponseID)
	_, err = p.n.Inst.Reply(ctx, "s", p.blockers[2].ID, core.Reply{Kind: event.KindPermission, ResponseID: "r3", Decision: core.ReplyOnce})
	winner = conflict(t, err)
	assert.Equal(t, core.BlockerCancelled, winner.State)
	assert.Equal(t, event.CancelSibling, winner.Reason, "the permission request")
}

// A plain reject ends the turn and settles its call declined in the
// reply's transaction, so the call is not left waiting behind the ended
// turn; a reject with a message fails only its call, settled by the
// continuation, and the turn waits on for the step's other blockers.
func TestRejectedPermissionSettlesItsCallDeclined(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		p := parkOn(t, "p q")
		perm := p.blockers[0]
		res, err := p.n.Inst.Reply(ctx, "s", perm.ID, core.Reply{Kind: event.KindPermission, ResponseID: "r1", Decision: core.ReplyReject})
		require.NoError(t, err)
		assert.Equal(t, core.BlockerRejected, res.State)
		p.noStart(t)
		assert.Equal(t, "interrupted", p.tr.PromptState(p.pid))
		settled := treetest.OfType(p.tr.Events("s"), event.ToolSettled)
		require.Len(t, settled, 1, "the rejected call is settled")
		var s event.Settled
		require.NoError(t, settled[0].Decode(&s))
		assert.Equal(t, event.Settled{CallID: perm.CallID, Outcome: event.OutcomeDeclined, Output: core.DeclinedByUser}, s)
		assert.Empty(t, p.pending(t), "the question is cancelled with it")
	})
	t.Run("with a message", func(t *testing.T) {
		p := parkOn(t, "p q")
		res, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, core.Reply{Kind: event.KindPermission, ResponseID: "r1", Decision: core.ReplyReject, Message: "not that key"})
		require.NoError(t, err)
		assert.Equal(t, core.BlockerRejected, res.State)
		p.noStart(t)
		assert.Equal(t, "running", p.tr.PromptState(p.pid))
		assert.Empty(t, treetest.OfType(p.tr.Events("s"), event.ToolSettled), "settled by the continuation")
		assert.Equal(t, []string{p.blockers[1].ID}, p.pending(t))
	})
}

// An always reply approves the step's other permission requests its rules
// now cover, and nothing else: a question of the same step still waits,
// and so does the turn.
func TestAlwaysReplyLeavesAQuestionOfItsStepPending(t *testing.T) {
	p := parkOn(t, "p q")
	res, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, core.Reply{Kind: event.KindPermission, ResponseID: "r1", Decision: core.ReplyAlways})
	require.NoError(t, err)
	assert.Equal(t, core.BlockerApproved, res.State)
	p.noStart(t)
	assert.Equal(t, []string{p.blockers[1].ID}, p.pending(t), "the question waits")
	assert.Equal(t, "running", p.tr.PromptState(p.pid))
}

// A task blocker takes no reply, even one naming no kind: only its
// sub-agent's turn resolves it.
func TestTaskBlockerTakesNoReply(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(offlineTaskRunner(t, tr))
	n.NewSession("root")
	n.Admit("root", "/task /ask which colour?")
	n.Idle()
	tasks, err := n.Inst.Blockers(ctx, "root", event.KindTask)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	for name, r := range map[string]core.Reply{
		"an answer": {ResponseID: "r1", Answers: [][]string{{"green"}}},
		"a cancel":  {ResponseID: "r2", Cancel: true},
		"a reject":  {ResponseID: "r3", Decision: core.ReplyReject},
	} {
		_, err := n.Inst.Reply(ctx, "root", tasks[0].ID, r)
		assert.ErrorIs(t, err, core.ErrConflict, name)
	}
	still, err := n.Inst.Blockers(ctx, "root", event.KindTask)
	require.NoError(t, err)
	assert.Equal(t, tasks, still, "the task call still waits for its sub-agent")
}

// A response_id is bounded: one of exactly MaxResponseIDLen bytes is a
// response_id like any other.
func TestResponseIDUpToTheCap(t *testing.T) {
	p := parkOn(t, "q")
	_, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, answer(strings.Repeat("r", core.MaxResponseIDLen+1), "red"))
	assert.ErrorIs(t, err, core.ErrInvalid, "one byte over the cap")
	res, err := p.n.Inst.Reply(ctx, "s", p.blockers[0].ID, answer(strings.Repeat("r", core.MaxResponseIDLen), "red"))
	require.NoError(t, err, "exactly the cap")
	assert.Equal(t, core.BlockerAnswered, res.State)
}
