package check_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// askAndTask answers the prompt "go" with one step that starts a
// foreground child (sleeping an hour on the fake clock) and asks a
// question, then with "done"; every other prompt goes to the offline
// model.
type askAndTask struct{ offline model.Model }

func (askAndTask) Name() string { return "ask-and-task" }

func (m askAndTask) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if len(req.Messages) == 0 || req.Messages[0].Text != "go" {
		return m.offline.Stream(ctx, req)
	}
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool {
			return &chunks{c: []model.Chunk{{Text: "done"}, {Finish: model.FinishStop}}}, nil
		}
	}
	return &chunks{c: []model.Chunk{
		{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: "task", Arguments: `{"prompt":"/sleep 1h"}`}},
		{ToolCall: &model.ToolCallDelta{Index: 1, ID: "call_1", Name: tool.QuestionName, Arguments: `{"questions":[{"question":"Go on?"}]}`}},
		{Finish: model.FinishToolCalls},
	}}, nil
}

// chunks streams a fixed answer.
type chunks struct{ c []model.Chunk }

func (s *chunks) Recv(context.Context) (model.Chunk, error) {
	if len(s.c) == 0 {
		return model.Chunk{}, io.EOF
	}
	c := s.c[0]
	s.c = s.c[1:]
	return c, nil
}

func (s *chunks) Close() error { return nil }

// A reply cancelling the question of a step that also waits for a running
// child ends the turn as the user's interrupt: the child's job ends in
// that transaction, written between the turn's end and the cancellation
// of the prompts queued behind it, which are the reply's doing too.
func TestAReplyEndingATurnWithAChildCancelsItsQueue(t *testing.T) {
	tr := treetest.New(t)
	reg, err := tool.NewRegistry(tool.Task(), tool.QuestionTool())
	require.NoError(t, err)
	r, err := runner.New(askAndTask{offline: offline.New(tr.Clock, offline.Options{})}, reg, runner.NewConfig())
	require.NoError(t, err)
	n := tr.Boot(r)
	s := n.NewSession("q")
	sub := n.Inst.Subscribe(s, 1024)
	n.Admit(s, "go")
	queued := n.Admit(s, "queued behind the question")
	limit := time.NewTimer(30 * time.Second) // only to fail instead of hanging
	defer limit.Stop()
	for parked := false; !parked; {
		select {
		case e := <-sub.C:
			parked = e.Type == event.StepParked // after its child started
		case <-limit.C:
			t.Fatal("the step never parked")
		}
	}
	sub.Close()
	qs, err := n.Inst.Blockers(context.Background(), s, event.KindQuestion)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	body, _ := json.Marshal(map[string]any{"cancel": true})
	sent := maxGseq(t, tr.Path)
	_, err = n.Inst.Reply(context.Background(), s, qs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Cancel: true})
	require.NoError(t, err)
	answered := maxGseq(t, tr.Path)
	n.Idle()
	require.Equal(t, "cancelled", tr.PromptState(queued))
	require.NotEmpty(t, treetest.OfType(tr.Events(s), event.JobEnded))
	n.Crash()
	checkpointed(t, tr.Path)

	l := &check.Ledger{Replies: []check.Reply{{Session: s, Question: qs[0].ID, ResponseID: "r1", Cancel: true, Body: string(body), Status: 200, Sent: sent, Answered: answered}}}
	violations := func(path string) []string {
		res, err := check.Tree(path, l, check.Options{Label: "reply end"})
		require.NoError(t, err)
		var all []string
		for _, v := range res.Violations {
			all = append(all, v.String())
		}
		return all
	}
	assert.Empty(t, violations(tr.Path))

	// The reply's answer comes once the child has stopped: an answer
	// before the child's last work (here, its step) is one that let the
	// child go on.
	early := *l
	early.Replies = []check.Reply{l.Replies[0]}
	early.Replies[0].Answered = queryInt(t, tr.Path, `SELECT MAX(gseq) FROM events WHERE session_id = 'q.1' AND type = '`+string(event.StepStarted)+`'`) - 1
	res, err := check.Tree(tr.Path, &early, check.Options{Label: "reply end"})
	require.NoError(t, err)
	var found bool
	for _, v := range res.Violations {
		found = found || v.Rule == check.RuleAfterInterrupt && strings.Contains(v.Detail, "a reply ending the turn at "+qs[0].ID+" answered 200")
	}
	assert.True(t, found, "%v", res.Violations)
}

// maxGseq is the tree's commit position.
func maxGseq(t *testing.T, path string) int64 {
	t.Helper()
	return queryInt(t, path, `SELECT COALESCE(MAX(gseq), 0) FROM events`)
}
