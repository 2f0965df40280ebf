package check_test

import (
	"context"
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

// The child-question fixture's root session; its children are a.1, a.2, ….
const askRoot = "a"

// childAsks names what the child-question fixture's children asked.
type childAsks struct {
	answered, always, background, waiting string // blocker ids
}

// childQuestionFixture writes a tree whose children ask (DESIGN §9–§10):
// a foreground child asks, its question is answered on the root's path
// after a kill, the child continues and its parent after it (a.1); a
// foreground child's call asks for permission, approved always (a.2), so a
// later child's call of the same tool does not ask (a.3); a background
// child asks and is left waiting (a.4); and, last, a foreground child asks
// and is left waiting, with its parent waiting on it and a prompt queued
// behind the parent (a.5). Every listing (on the root's path: tree-wide)
// and reply is in the ledger.
func childQuestionFixture(t *testing.T) (string, *check.Ledger, childAsks) {
	t.Helper()
	tr := treetest.New(t)
	gseq := commitPosition(tr)
	rc := &receivers{clock: tr.Clock, gseq: gseq, entered: make(chan string, 1), ledger: check.Ledger{Tools: map[string]bool{"hook": false, "ihook": true, "ahook": false}}}
	ahook := tool.Func{DefaultPermission: "ask", Name: "ahook", Run: func(ctx context.Context, c tool.Call) (string, error) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.ledger.Record(check.Delivery{At: tr.Clock.Now(), Tool: "ahook", CallID: c.ID, Key: c.IdempotencyKey, Gseq: gseq()})
		return "applied", nil
	}}
	reg, err := tool.NewRegistry(append(rc.tools(), ahook, tool.Task(), tool.QuestionTool())...)
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	ctx := context.Background()
	var ids childAsks

	n := tr.Boot(r)
	a := n.NewSession(askRoot)
	// list lists the tree's pending blockers of a kind on the root's path
	// and returns the newest.
	list := func(kind string) string {
		sent := gseq()
		bs, err := n.Inst.Blockers(ctx, a, kind)
		require.NoError(t, err)
		require.NotEmpty(t, bs)
		ls := check.Listing{Session: a, At: tr.Clock.Now(), Sent: sent, Answered: gseq(), IDs: []string{}}
		if kind == event.KindPermission {
			ls.Kind = "permission"
		}
		for _, b := range bs {
			ls.IDs = append(ls.IDs, b.ID)
		}
		rc.mu.Lock()
		rc.ledger.Listings = append(rc.ledger.Listings, ls)
		rc.mu.Unlock()
		return bs[len(bs)-1].ID
	}
	reply := func(id string, cr core.Reply, cancel bool) {
		rec := check.Reply{Session: a, Question: id, ResponseID: cr.ResponseID, Cancel: cancel, Sent: gseq()}
		_, err := n.Inst.Reply(ctx, a, id, cr)
		var conflict *core.ReplyConflict
		switch {
		case errors.As(err, &conflict):
			rec.Status, rec.Winner = 409, conflict.Winner.ResponseID
		default:
			require.NoError(t, err)
			rec.Status = 200
		}
		rec.At, rec.Answered = tr.Clock.Now(), gseq()
		rc.mu.Lock()
		rc.ledger.Replies = append(rc.ledger.Replies, rec)
		rc.mu.Unlock()
		n.Idle()
	}

	n.Admit(a, "/task /ask which colour?\nfirst")
	n.Idle()
	ids.answered = list(event.KindQuestion)
	n.Crash()
	n = tr.Boot(r)
	n.Idle()
	reply(ids.answered, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}}, false)

	n.Admit(a, "/task /tool ahook {\"n\":1}\nsecond")
	n.Idle()
	ids.always = list(event.KindPermission)
	reply(ids.always, core.Reply{Kind: event.KindPermission, ResponseID: "r2", Decision: core.ReplyAlways}, false)
	n.Admit(a, "/task /tool ahook {\"n\":2}\nthird")
	n.Idle()

	n.Admit(a, "/task --background /ask which size?\nfourth")
	n.Idle()
	ids.background = list(event.KindQuestion)

	n.Admit(a, "/task /ask still there?\nfifth")
	n.Idle()
	ids.waiting = list(event.KindQuestion)
	n.Admit(a, "queued behind the waiting child")
	n.Idle()
	list(event.KindQuestion)
	n.Crash()

	path, l := written(t, tr, rc)
	return path, l, ids
}
