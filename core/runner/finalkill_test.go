package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A kill between a turn's final answer (recorded complete, no tool calls)
// and its end record leaves a turn with nothing to ask the model: the
// resume counts (DESIGN §6.6) and ends the turn without a model request,
// and adds no continuation notice, which would otherwise stay in the
// transcript as the last thing before the next prompt, telling the model
// of an interruption that cost it nothing. A kill just before the answer is
// recorded (mid-stream, as far as the database knows) still resumes with
// the notice and asks again.
func TestKillAfterFinalAnswerAddsNoNotice(t *testing.T) {
	// A clean one-step turn: its last commit is the end, the one before
	// it the final answer.
	clean := treetest.New(t)
	n := clean.Boot(newRunner(t, &scriptModel{steps: answerAll}, runner.NewConfig()))
	sid := n.NewSession("s")
	base := n.Kill.Commits()
	n.Admit(sid, "first")
	n.Idle()
	answer := n.Kill.Commits() - base - 1
	evs := clean.Events(sid)
	require.Equal(t, event.ExecutionSucceeded, evs[len(evs)-1].Type)
	require.Equal(t, event.StepCompleted, evs[len(evs)-2].Type, "the answer commits just before the end")

	for _, tc := range []struct {
		name     string
		after    bool       // kill after the answer's commit, else before it
		left     event.Type // the last event the kill leaves
		notice   bool       // the resume adds the notice
		requests int        // model requests for both prompts
	}{
		{name: "between the final answer and the end", after: true, left: event.StepCompleted, requests: 2},
		{name: "before the answer is recorded", after: false, left: event.StepStarted, notice: true, requests: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := treetest.New(t)
			m := &scriptModel{steps: answerAll}
			n := tr.Boot(newRunner(t, m, runner.NewConfig()))
			sid := n.NewSession("s")
			n.Kill.KillAt(answer, tc.after)
			n.Admit(sid, "first")
			<-n.Kill.Died()
			n.Crash()
			evs := tr.Events(sid)
			require.Equal(t, tc.left, evs[len(evs)-1].Type, "the kill lands where the case says")

			n2 := tr.Boot(newRunner(t, m, runner.NewConfig()))
			n2.Idle()
			n2.Admit(sid, "second")
			n2.Idle()

			evs = tr.Events(sid)
			require.Len(t, treetest.OfType(evs, event.ExecutionResumed), 1, "the resume is counted either way")
			terms := treetest.Terminals(evs)
			require.Len(t, terms, 2)
			for _, e := range terms {
				assert.Equal(t, event.ExecutionSucceeded, e.Type)
			}
			assert.Equal(t, tc.requests, m.Requests(1), "the model's requests")
			var notices int
			for _, msg := range m.lastReq.Messages {
				if msg.Text == event.ContinuationNotice {
					notices++
				}
			}
			last := m.lastReq.Messages[len(m.lastReq.Messages)-1]
			assert.Equal(t, model.Message{Role: model.RoleUser, Text: "second"}, last, "the next prompt's request ends with it")
			if tc.notice {
				assert.Equal(t, 1, notices, "the resumed step followed the notice, and it stays in the transcript")
			} else {
				assert.Zero(t, notices, "the next prompt's request carries no continuation notice")
			}
		})
	}
}

func answerAll(int) scriptStep { return scriptStep{chunks: text("the ", "answer")} }
