package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A call that got its child keeps it at the limit across a kill: with a
// limit of one, killed before or after each commit of a turn whose task
// call made the tree's only child, and booted again, the call re-runs,
// re-attaches to that child and settles ok. Counting the re-attaching
// call as a new child would refuse it, leaving a child whose work no call
// reads (TestSubagentLimitHoldsAcrossAKill looks only at the child's own
// refused call).
func TestSubagentLimitKeepsTheCallThatGotItsChild(t *testing.T) {
	cfg := runner.NewConfig().WithMaxSubagents(1)
	killTaskTurnAtEveryCommitWith(t, cfg, "/task hello child", func(t *testing.T, tr *treetest.Tree, _ *countingModel, _ bool) {
		assert.Equal(t, []string{"root", "root.1"}, sessionsOf(tr))
		sets := settlements(t, tr.Events("root"))
		require.Len(t, sets, 1)
		assert.Equal(t, event.OutcomeOK, sets[0].Outcome, "%s", sets[0].Output)
	})
}
