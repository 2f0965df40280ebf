package runner_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/runner"
)

// Leaving out exchanges makes room for the notice that says so: a request
// that would fit with one exchange left out, but not with the notice of
// it too, leaves out the next exchange as well. Its prompts have no tool
// output to elide, so nothing else could bring it back under the context
// size: fitted without counting the notice, it goes one byte over.
func TestExchangeLeftOutMakesRoomForItsNotice(t *testing.T) {
	prompts := []string{prompt(0, 1000, 0), prompt(1, 1000, 0), prompt(2, 1000, 0)}
	// The second exchange (its prompt and "ok") and the current prompt
	// fit, but not with the notice of the first exchange's two messages.
	budget := 1000 + len("ok") + 1000 + len(fmt.Sprintf(runner.OmittedNotice, 2)) - 1
	req := lastRequest(t, budget, prompts...)

	assert.LessOrEqual(t, requestTextBytes(req), budget, "the request with its notice fits")
	assert.Equal(t, 4, omittedCount(req), "both earlier exchanges are left out")
	assert.Equal(t, 2, len(req.Messages), "the notice and the current prompt")
}
