package check_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// The real core, judged by the checker (the simulator found this one:
// core once took the parked parent's claim for the notice and started the
// parked turn, cause resolution, before its blocker was resolved): a
// background child that ends while
// its parent's turn is parked (on a foreground child waiting for an answer)
// admits its notice to the parent's queue without promoting it past the
// park (DESIGN §9: prompts admitted while parked are queued): the parked
// turn continues only from its child's end.
func TestNoticeToParkedParentKeepsItParked(t *testing.T) {
	judgeNoticeToParkedParent(t)
}

// noticeToParkedParent runs the history TestNoticeToParkedParentKeepsItParked
// judges and returns its file and ledger.
func noticeToParkedParent(t *testing.T) (string, *check.Ledger) {
	tr := treetest.New(t)
	entered, release := make(chan string, 1), make(chan struct{})
	gate := tool.Func{DefaultPermission: "allow", Name: "gate", Run: func(ctx context.Context, c tool.Call) (string, error) {
		entered <- c.ID
		select {
		case <-release:
			return "open", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	reg, err := tool.NewRegistry(gate, tool.Task(), tool.QuestionTool())
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	ctx := context.Background()
	n := tr.Boot(r)
	p := n.NewSession(taskRoot)

	// p.1 runs in the background, held at its gate.
	n.Admit(p, "/task --background /tool gate {}\nfirst")
	<-entered
	// p.2 asks; p waits for p.2.
	parentSub, childSub := n.Inst.Subscribe(p, 1024), n.Inst.Subscribe(taskRoot+".2", 1024)
	n.Admit(p, "/task /ask which colour?\nsecond")
	parked := func(sub *core.Subscription) event.Event {
		for ev := range sub.C {
			if ev.Type == event.StepParked {
				return ev
			}
		}
		t.Fatal("the subscription closed before a park")
		return event.Event{}
	}
	parked(parentSub)
	var park event.Parked
	require.NoError(t, parked(childSub).Decode(&park))
	parentSub.Close()
	childSub.Close()

	// p.1 ends while p is parked: its notice is queued.
	close(release)
	n.Idle()
	qid := park.Blockers[0].ID
	_, err = n.Inst.Reply(ctx, taskRoot+".2", qid, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}})
	require.NoError(t, err)
	n.Idle()
	n.Crash()

	checkpointed(t, tr.Path)
	return tr.Path, &check.Ledger{Replies: []check.Reply{{Session: taskRoot + ".2", Question: qid, ResponseID: "r1", Status: 200}}}
}

// judgeNoticeToParkedParent is the test's body.
func judgeNoticeToParkedParent(t *testing.T) {
	path, l := noticeToParkedParent(t)
	res, err := check.Tree(path, l, check.Options{Label: "notice to a parked parent"})
	require.NoError(t, err)
	var all []string
	for _, v := range res.Violations {
		all = append(all, v.String())
	}
	assert.Empty(t, all)
	assert.Equal(t, 1, res.Notices)
	assert.Equal(t, 1, res.TaskResults)
}
