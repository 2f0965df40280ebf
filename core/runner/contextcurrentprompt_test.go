package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A resumed turn's continuation notice opens an exchange too, but not the
// current prompt's: the request of a turn resumed past the context size
// still sends its prompt, with its call and result, and leaves out only
// the exchanges before it. Fitting that counted the notice as where the
// current exchange begins would leave out the prompt the turn answers and
// send the model a notice to go on with nothing before it. The notice is
// marked as one (model.Message.Notice), as the notice of what was left out is.
func TestResumedTurnPastTheContextSizeKeepsItsPrompt(t *testing.T) {
	const budget = 2000
	cfg := runner.NewConfig().WithContextBytes(budget)
	tr := treetest.New(t)
	running := make(chan struct{})
	stuck := tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true, Run: func(ctx context.Context, _ tool.Call) (string, error) {
		close(running)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	m := &exchangeModel{}
	n := tr.Boot(newRunner(t, m, cfg, stuck))
	n.NewSession("s")
	n.Admit("s", prompt(0, 3000, 0))
	n.Idle()
	current := prompt(1, 3000, 1000)
	n.Admit("s", current)
	<-running
	n.Crash()
	tr.Boot(newRunner(t, m, cfg, bigTool)).Idle()

	req := m.last()
	notice := req.Messages[len(req.Messages)-1]
	require.Equal(t, event.ContinuationNotice, notice.Text, "the last request is the resumed turn's, after its call ran again")
	assert.True(t, notice.Notice, "the continuation notice is marked as revenant's, not the user's: a model (offline's) answers the prompt before it")
	requireCallsPaired(t, req)
	assert.Equal(t, 2, omittedCount(req), "only the earlier exchange, its prompt and answer, is left out")
	require.Greater(t, len(req.Messages), 1)
	assert.Equal(t, current, req.Messages[1].Text, "the current prompt is sent, though past the context size")
}
