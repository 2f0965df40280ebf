package runner_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// twoAsks is an embedder's blocking tool whose one call raises two
// blockers: the question tool's ask, twice.
type twoAsks struct{ tool.Blocking }

func (q twoAsks) Ask(args json.RawMessage) ([]tool.Ask, error) {
	asks, err := q.Blocking.Ask(args)
	return append(asks, asks...), err
}

// askOnce runs one question call to its park and returns the session's
// pending blockers.
func askOnce(t *testing.T, q tool.Tool, config string) (*treetest.Tree, *treetest.Node, *scriptModel, []core.Blocker) {
	tr := treetest.New(t)
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall(tool.QuestionName, colourQuestion)}
		}
		return scriptStep{chunks: text("done")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), q))
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "p", Config: json.RawMessage(config)})
	require.NoError(t, err)
	_, err = n.Inst.Admit(ctx, "s", core.PromptInput{ClientID: "p1", Text: "ask me"})
	require.NoError(t, err)
	n.Idle()
	bs, err := n.Inst.Blockers(ctx, "s", "")
	require.NoError(t, err)
	return tr, n, m, bs
}

// A call that raises several blockers parks them under ids of their own
// (by ordinal); answering them all continues the call once, with every
// answer.
func TestOneCallRaisesSeveralBlockers(t *testing.T) {
	tr, n, m, bs := askOnce(t, twoAsks{tool.QuestionTool().(tool.Blocking)}, `{}`)
	require.Len(t, bs, 2)
	assert.NotEqual(t, bs[0].ID, bs[1].ID)
	assert.Equal(t, bs[0].CallID, bs[1].CallID)
	for i, b := range bs {
		_, err := n.Inst.Reply(ctx, "s", b.ID, core.Reply{Kind: event.KindQuestion, ResponseID: b.ID, Answers: [][]string{{[]string{"red", "green"}[i]}}})
		require.NoError(t, err)
	}
	n.Idle()
	s := settlements(t, tr.Events("s"))
	require.Len(t, s, 1)
	assert.Contains(t, s[0].Output, `"red"`)
	assert.Contains(t, s[0].Output, `"green"`)
	assert.Equal(t, 1, m.Requests(2), "the call continued once")
}

// A question asks a person already: a rule that asks before the question
// tool parks the question alone, not a permission request before it.
func TestAskRuleOnAQuestionAsksTheQuestionOnly(t *testing.T) {
	_, _, _, bs := askOnce(t, tool.QuestionTool(), `{"permissions":[{"action":"question","resource":"*","decision":"ask"}]}`)
	require.Len(t, bs, 1)
	assert.Equal(t, event.KindQuestion, bs[0].Kind)
}
