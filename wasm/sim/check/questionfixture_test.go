package check_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// questions names the question fixture's questions and prompts.
type questions struct {
	answered, cancelled, interrupted, waiting string // question ids
	waitingPrompt                             string
}

// questionFixture writes a tree (session "q") whose questions go every way
// the rules look at: one asked, listed across a kill, answered (a
// different reply then refused 409 with the winner, the same reply again
// 200) and continued; one cancelled by its reply; one cancelled by the
// user's interrupt; one left waiting at the end with a prompt queued
// behind it. The ledger lists every listing and reply, as the simulator's
// would.
func questionFixture(t *testing.T) (string, *check.Ledger, questions) {
	t.Helper()
	tr := treetest.New(t)
	gseq := commitPosition(tr)
	reg, err := tool.NewRegistry(tool.QuestionTool())
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	ctx := context.Background()
	l := &check.Ledger{}
	var qs questions

	n := tr.Boot(r)
	s := n.NewSession("q")
	// list lists the pending questions and returns the newest.
	list := func() string {
		sent := gseq()
		bs, err := n.Inst.Blockers(ctx, s, event.KindQuestion)
		require.NoError(t, err)
		require.NotEmpty(t, bs)
		ls := check.Listing{Session: s, At: tr.Clock.Now(), Sent: sent, Answered: gseq()}
		for _, b := range bs {
			ls.IDs = append(ls.IDs, b.ID)
		}
		l.Listings = append(l.Listings, ls)
		return bs[len(bs)-1].ID
	}
	// ask admits a prompt that asks, lets it park and lists its question.
	ask := func(text string) string {
		n.Admit(s, text)
		n.Idle()
		return list()
	}
	// reply sends a reply and records it with its outcome.
	reply := func(qid, responseID string, answers [][]string, cancel bool) {
		body, _ := json.Marshal(map[string]any{"answers": answers, "cancel": cancel})
		rec := check.Reply{Session: s, Question: qid, ResponseID: responseID, Cancel: cancel, Body: string(body), Sent: gseq()}
		_, err := n.Inst.Reply(ctx, s, qid, core.Reply{Kind: event.KindQuestion, ResponseID: responseID, Answers: answers, Cancel: cancel})
		var conflict *core.ReplyConflict
		switch {
		case errors.As(err, &conflict):
			rec.Status, rec.Winner = 409, conflict.Winner.ResponseID
		default:
			require.NoError(t, err)
			rec.Status = 200
		}
		rec.At, rec.Answered = tr.Clock.Now(), gseq()
		l.Replies = append(l.Replies, rec)
		n.Idle()
	}

	qs.answered = ask("/ask which colour?\nfirst")
	n.Crash()
	n = tr.Boot(r)
	n.Idle()
	require.Equal(t, qs.answered, list(), "the same question after the kill")
	reply(qs.answered, "r1", [][]string{{"green"}}, false)
	reply(qs.answered, "r2", [][]string{{"blue"}}, false)
	reply(qs.answered, "r1", [][]string{{"green"}}, false)

	qs.cancelled = ask("/ask shall I go on?\nsecond")
	reply(qs.cancelled, "r3", nil, true)

	qs.interrupted = ask("/ask interrupted?\nthird")
	sent := gseq()
	did, err := n.Inst.Interrupt(ctx, s, event.ReasonUser)
	require.NoError(t, err)
	require.True(t, did)
	l.Interrupts = append(l.Interrupts, check.Interrupt{Session: s, At: tr.Clock.Now(), Sent: sent, Answered: gseq()})
	n.Idle()

	qs.waiting = ask("/ask still there?\nfourth")
	qs.waitingPrompt = n.Admit(s, "queued behind the question")
	n.Idle()
	n.Crash()

	checkpointed(t, tr.Path)
	return tr.Path, l, qs
}
