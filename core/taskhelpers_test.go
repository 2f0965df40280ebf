package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/internal/treetest"
)

// offlineTaskRunner is the turn runner with the offline model on tr's
// clock and the task and question tools: sub-agents and questions driven
// by prompt text ("/task /sleep 1h", "/task /ask which colour?").
func offlineTaskRunner(t *testing.T, tr *treetest.Tree) *runner.Runner {
	t.Helper()
	reg, err := tool.NewRegistry(tool.Task(), tool.QuestionTool())
	require.NoError(t, err)
	r, err := runner.New(offline.New(tr.Clock, offline.Options{}), reg, runner.NewConfig())
	require.NoError(t, err)
	return r
}

// replyAndDie answers the session's one pending question on n and kills n
// right after the reply's commit: the claim is taken, the turn's start
// never runs.
func replyAndDie(t *testing.T, tr *treetest.Tree, n *treetest.Node, sessionID string) {
	t.Helper()
	qs, err := n.Inst.Blockers(ctx, sessionID, event.KindQuestion)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	n.Kill.KillAt(1, true)
	_, _ = n.Inst.Reply(ctx, sessionID, qs[0].ID, core.Reply{Kind: event.KindQuestion, ResponseID: "r1", Answers: [][]string{{"green"}}})
	<-n.Kill.Died()
	n.Crash()
	require.True(t, tr.Claim(qs[0].SessionID).Exists, "the reply's claim")
}

// requireTaskTurnInterruptedByUser checks the session's one turn end: its
// task turn, interrupted{user} as its ancestor's was.
func requireTaskTurnInterruptedByUser(t *testing.T, tr *treetest.Tree, sessionID string) {
	t.Helper()
	terms := treetest.Terminals(tr.Events(sessionID))
	require.Len(t, terms, 1, "the task turn of %s ended", sessionID)
	var in event.Interrupted
	require.NoError(t, terms[0].Decode(&in))
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
	assert.Equal(t, event.ReasonUser, in.Reason, "interrupted as its ancestor was")
}

// taskPromptID is the id of the child's task prompt, its one admission so far.
func taskPromptID(t *testing.T, tr *treetest.Tree, childID string) string {
	t.Helper()
	admitted := treetest.OfType(tr.Events(childID), event.PromptAdmitted)
	require.Len(t, admitted, 1)
	var a event.Admitted
	require.NoError(t, admitted[0].Decode(&a))
	return a.PromptID
}

// startCauses lists the causes of the execution.started events in evs.
func startCauses(t *testing.T, evs []event.Event) []string {
	t.Helper()
	var causes []string
	for _, e := range treetest.OfType(evs, event.ExecutionStarted) {
		var s event.Started
		require.NoError(t, e.Decode(&s))
		causes = append(causes, s.Cause)
	}
	return causes
}

// onlyCancel is the one prompt.cancelled event in evs, decoded.
func onlyCancel(t *testing.T, evs []event.Event) event.Cancelled {
	t.Helper()
	cancelled := treetest.OfType(evs, event.PromptCancelled)
	require.Len(t, cancelled, 1)
	var c event.Cancelled
	require.NoError(t, cancelled[0].Decode(&c))
	return c
}
