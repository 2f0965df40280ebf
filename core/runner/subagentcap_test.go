package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

const subagentLimitMsg = "this session tree already has 2 sub-agents, the most it may hold (max_subagents 2)"

// A task call in a tree that holds max_subagents children already, at any
// depth, creates nothing and settles as a tool error naming the limit; the
// turn goes on and succeeds. Foreground: a grandchild's call is refused
// (the root's and the child's counted). Background: a third prompt's call
// is refused, though both earlier children have ended: every child the
// tree ever had counts.
func TestTaskPastTheTreesSubagentLimit(t *testing.T) {
	cfg := runner.NewConfig().WithMaxSubagents(2)
	t.Run("foreground", func(t *testing.T) {
		tr := treetest.New(t)
		n := tr.Boot(taskRunner(t, tr, offline.New(nil, offline.Options{}), cfg))
		sid := n.NewSession("root")
		pid := n.Admit(sid, "/task /task /task deep")
		n.Idle()
		assert.Equal(t, "succeeded", tr.PromptState(pid))
		assert.Equal(t, []string{"root", "root.1", "root.2"}, sessionsOf(tr))
		requireOneToolError(t, tr, "root.2", subagentLimitMsg)
		assert.Equal(t, map[string]string{"root.1": "ended", "root.2": "ended"}, jobStates(tr))
		noClaims(t, tr)
	})
	t.Run("background", func(t *testing.T) {
		tr := treetest.New(t)
		n := tr.Boot(taskRunner(t, tr, offline.New(nil, offline.Options{}), cfg))
		sid := n.NewSession("root")
		for range 3 {
			pid := n.Admit(sid, "/task --background look around")
			n.Idle()
			assert.Equal(t, "succeeded", tr.PromptState(pid))
		}
		assert.Equal(t, []string{"root", "root.1", "root.2"}, sessionsOf(tr))
		sets := settlements(t, tr.Events(sid))
		require.Len(t, sets, 3)
		assert.Equal(t, event.OutcomeOK, sets[1].Outcome)
		assert.Equal(t, event.OutcomeError, sets[2].Outcome)
		assert.Contains(t, sets[2].Output, subagentLimitMsg)
		noClaims(t, tr)
	})
}

// The limit's decision survives a kill anywhere: killed before or after
// each commit of a turn whose child's own task call is past a limit of
// one, and booted again, the tree has one child, and the child's call was
// refused exactly once, never run again into a grandchild.
func TestSubagentLimitHoldsAcrossAKill(t *testing.T) {
	cfg := runner.NewConfig().WithMaxSubagents(1)
	killTaskTurnAtEveryCommitWith(t, cfg, "/task /task hello child", func(t *testing.T, tr *treetest.Tree, m *countingModel, _ bool) {
		assert.Equal(t, []string{"root", "root.1"}, sessionsOf(tr), "one child, no grandchild")
		requireOneToolError(t, tr, "root.1", "this session tree already has 1 sub-agent, the most it may hold (max_subagents 1)")
		require.Len(t, treetest.Terminals(tr.Events("root.1")), 1, "the child's turn ended once")
		terms := treetest.Terminals(tr.Events("root"))
		require.Len(t, terms, 1)
		assert.Equal(t, event.ExecutionSucceeded, terms[0].Type)
		assert.Len(t, settlements(t, tr.Events("root")), 1)
	})
}

// The runner refuses a negative limit; 0 allows no sub-agent.
func TestMaxSubagentsConfig(t *testing.T) {
	reg, err := tool.NewRegistry()
	require.NoError(t, err)
	_, err = runner.New(offline.New(nil, offline.Options{}), reg, runner.NewConfig().WithMaxSubagents(-1))
	require.ErrorContains(t, err, "max sub-agents -1 must be at least 0")

	tr := treetest.New(t)
	n := tr.Boot(taskRunner(t, tr, offline.New(nil, offline.Options{}), runner.NewConfig().WithMaxSubagents(0)))
	sid := n.NewSession("root")
	n.Admit(sid, "/task hello")
	n.Idle()
	assert.Equal(t, []string{"root"}, sessionsOf(tr))
	sets := settlements(t, tr.Events(sid))
	require.Len(t, sets, 1)
	assert.Contains(t, sets[0].Output, "already has 0 sub-agents")
}
