package check_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// askTwice answers the prompt "go" with one step that asks two questions,
// then with "done"; every other prompt goes to the offline model.
type askTwice struct{ offline model.Model }

func (askTwice) Name() string { return "ask-twice" }

func (m askTwice) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if len(req.Messages) == 0 || req.Messages[0].Text != "go" {
		return m.offline.Stream(ctx, req)
	}
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool {
			return &chunks{c: []model.Chunk{{Text: "done"}, {Finish: model.FinishStop}}}, nil
		}
	}
	return &chunks{c: []model.Chunk{
		{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: tool.QuestionName, Arguments: `{"questions":[{"question":"First?"}]}`}},
		{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_1", Name: tool.QuestionName, Arguments: `{"questions":[{"question":"Second?"}]}`}},
		{Finish: model.FinishToolCalls},
	}}, nil
}

// A reply that cancels one of a step's two questions ends the turn, and
// its transaction cancels the other as its sibling: the checker takes
// that, and names a sibling cancelled as if by an interrupt that nobody
// sent, the reply having ended the turn.
func TestASiblingOfACancellingReplyIsCancelledAsSuch(t *testing.T) {
	tr := treetest.New(t)
	reg, err := tool.NewRegistry(tool.QuestionTool())
	require.NoError(t, err)
	r, err := runner.New(askTwice{offline: offline.New(tr.Clock, offline.Options{})}, reg, runner.NewConfig())
	require.NoError(t, err)
	n := tr.Boot(r)
	s := n.NewSession("q")
	sub := n.Inst.Subscribe(s, 1024)
	n.Admit(s, "go")
	limit := time.NewTimer(30 * time.Second) // only to fail instead of hanging
	defer limit.Stop()
	for parked := false; !parked; {
		select {
		case e := <-sub.C:
			parked = e.Type == event.StepParked
		case <-limit.C:
			t.Fatal("the step never parked")
		}
	}
	sub.Close()
	qs, err := n.Inst.Blockers(context.Background(), s, event.KindQuestion)
	require.NoError(t, err)
	require.Len(t, qs, 2)
	body, _ := json.Marshal(map[string]any{"cancel": true})
	sent := maxGseq(t, tr.Path)
	_, err = n.Inst.Reply(context.Background(), s, qs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true})
	require.NoError(t, err)
	answered := maxGseq(t, tr.Path)
	n.Idle()
	n.Crash()
	checkpointed(t, tr.Path)

	l := &check.Ledger{Replies: []check.Reply{{Session: s, Question: qs[0].ID, ResponseID: "r1", Cancel: true, Body: string(body), Status: 200, Sent: sent, Answered: answered}}}
	sibling := fmt.Sprintf(`(SELECT seq FROM events WHERE session_id = 'q' AND type = '%s' AND json_extract(data, '$.blocker_id') = '%s')`, event.QuestionCancelled, qs[1].ID)
	require.Equal(t, event.CancelSibling, queryText(t, tr.Path, `SELECT json_extract(data, '$.reason') FROM events WHERE session_id = 'q' AND seq = `+sibling))
	res, err := check.Tree(tr.Path, l, check.Options{Label: "siblings"})
	require.NoError(t, err)
	require.Empty(t, res.Violations)
	requireCaught(t, tr.Path, l, "siblings", []tamperCase{
		{name: "a sibling of the cancelling reply cancelled as by an interrupt", want: check.RuleQuestionByClient, detail: "but a reply that cancelled a question of its step ended the turn",
			sql: []string{`UPDATE events SET data = json_set(data, '$.reason', 'interrupt') WHERE session_id = 'q' AND seq = ` + sibling}},
	})
}
