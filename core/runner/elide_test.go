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

// Elision stops as soon as the request fits the context size: a request
// exactly that large is sent whole, and one byte less elides the oldest
// output.
func TestRequestExactlyAtTheContextSizeIsNotElided(t *testing.T) {
	lastRequest := func(contextBytes int) model.Request {
		tr := treetest.New(t)
		big := tool.Func{DefaultPermission: "allow", Name: "big", IsIdempotent: true, Limit: tool.Limits{OutputCap: 1 << 20}, Run: func(context.Context, tool.Call) (string, error) {
			return strings.Repeat("z", 3000), nil
		}}
		m := &scriptModel{steps: func(k int) scriptStep {
			if k <= 2 {
				return scriptStep{chunks: toolCall("big", fmt.Sprintf(`{"n":%d}`, k))}
			}
			return scriptStep{chunks: text("done")}
		}}
		n := tr.Boot(newRunner(t, m, runner.NewConfig().WithContextBytes(contextBytes), big))
		n.NewSession("s")
		n.Admit("s", "fill the context")
		n.Idle()
		return m.lastReq
	}
	whole := lastRequest(1 << 20)
	require.Len(t, toolTexts(whole), 2)
	size := requestTextBytes(whole)

	assert.Equal(t, toolTexts(whole), toolTexts(lastRequest(size)), "a request exactly at the context size is sent whole")
	assert.Equal(t, fmt.Sprintf(runner.ElidedMarker, 3000), toolTexts(lastRequest(size - 1))[0], "one byte over, the oldest output is elided")
}

// requestTextBytes is the request's size as the context size counts it:
// the system prompt, each tool spec's name, description and schema, every
// message's text and every tool call's arguments.
func requestTextBytes(req model.Request) int {
	n := fixedBytes(req)
	for _, m := range req.Messages {
		n += len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	return n
}

// fixedBytes is what requestTextBytes counts of a request but its messages.
func fixedBytes(req model.Request) int {
	n := len(req.System)
	for _, spec := range req.Tools {
		n += len(spec.Name) + len(spec.Description) + len(spec.Schema)
	}
	return n
}
