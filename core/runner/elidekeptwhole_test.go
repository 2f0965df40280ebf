package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// When the current prompt's exchange alone is past the context size,
// elision works inside it, oldest output first, but never on a result that
// says the call did not run (here, declined by its tool's default deny):
// the output elided is the later, larger one. The results of earlier
// exchanges are covered by TestPermissionResultsKeptWholeAndCountedAtTheirSize;
// there planTranscript leaves exchanges out before elide has to cut, so
// only this case reaches elide's keep.
func TestDeclinedResultKeptWholeWhenTheCurrentExchangeIsElided(t *testing.T) {
	lastRequest := func(contextBytes int) model.Request {
		tr := treetest.New(t)
		deploy := tool.Func{DefaultPermission: "deny", Name: "deploy", Run: func(context.Context, tool.Call) (string, error) {
			return "deployed", nil
		}}
		big := tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true, Limit: tool.Limits{OutputCap: 1 << 20}, Run: func(context.Context, tool.Call) (string, error) {
			return strings.Repeat("z", 300), nil
		}}
		m := &scriptModel{steps: func(k int) scriptStep {
			switch k {
			case 1:
				return scriptStep{chunks: toolCall("deploy", `{}`)}
			case 2:
				return scriptStep{chunks: toolCall("big", `{}`)}
			}
			return scriptStep{chunks: text("done")}
		}}
		n := tr.Boot(newRunner(t, m, runner.NewConfig().WithContextBytes(contextBytes), deploy, big))
		n.NewSession("s")
		n.Admit("s", "deploy, then fill the context")
		n.Idle()
		return m.lastReq
	}
	whole := lastRequest(1 << 20)
	texts := toolTexts(whole)
	require.Len(t, texts, 2)
	declined := texts[0]
	require.Contains(t, declined, "declined")
	require.Greater(t, len(declined), len(fmt.Sprintf(runner.ElidedMarker, len(declined))), "elided, the declined result would be shorter")

	got := toolTexts(lastRequest(requestTextBytes(whole) - 1))
	require.Len(t, got, 2)
	assert.Equal(t, declined, got[0], "the declined result is kept whole")
	assert.Equal(t, fmt.Sprintf(runner.ElidedMarker, 300), got[1], "the output elided is the big one")
}
