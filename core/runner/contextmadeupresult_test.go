package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The results made up for calls left without one (NoResult, NotRun) are
// sent, so fitting counts them: a request one byte past the context size
// with its outputs elided leaves out its oldest exchange, the one of the
// unsettled calls, and then fits. Counted as nothing, those results would
// let the request go out past the context size.
func TestMadeUpResultsCountTowardTheContextSize(t *testing.T) {
	whole := requestAfterUnsettledCalls(t, 1<<30)
	require.Equal(t, -1, omittedCount(whole))
	budget := leastBytes(whole) - 1

	req := requestAfterUnsettledCalls(t, budget)
	assert.LessOrEqual(t, requestTextBytes(req), budget, "the request fits")
	assert.Equal(t, 4, omittedCount(req), "the exchange of the unsettled calls is left out: its prompt, the calls and their two results")
}
