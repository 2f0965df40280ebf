package event_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
)

// ev is an event of type typ carrying data as its payload.
func ev(t *testing.T, typ event.Type, data any) event.Event {
	t.Helper()
	b, err := json.Marshal(data)
	require.NoError(t, err)
	return event.Event{ID: "e1", SessionID: "s1", Seq: 1, Type: typ, Data: b}
}

// A turn ends with success, failure, or an interrupt for any reason but
// shutdown: a shutdown keeps the claim and the turn resumes at the next
// boot. Nothing else ends it, and an interrupt whose payload cannot be
// read is not taken for an end.
func TestIsTerminal(t *testing.T) {
	for _, tc := range []struct {
		e    event.Event
		want bool
	}{
		{ev(t, event.ExecutionSucceeded, event.Succeeded{PromptID: "p"}), true},
		{ev(t, event.ExecutionFailed, event.Failed{PromptID: "p", Type: event.FailModel}), true},
		{ev(t, event.ExecutionInterrupted, event.Interrupted{PromptID: "p", Reason: event.ReasonUser}), true},
		{ev(t, event.ExecutionInterrupted, event.Interrupted{PromptID: "p", Reason: event.ReasonSuperseded}), true},
		{ev(t, event.ExecutionInterrupted, event.Interrupted{PromptID: "p", Reason: event.ReasonShutdown}), false},
		{event.Event{Type: event.ExecutionInterrupted, Data: json.RawMessage(`not json`)}, false},
		{ev(t, event.ExecutionStarted, event.Started{PromptID: "p"}), false},
		{ev(t, event.StepParked, event.Parked{PromptID: "p"}), false},
		{ev(t, event.PromptCancelled, event.Cancelled{PromptID: "p", Reason: event.ReasonUser}), false},
	} {
		assert.Equal(t, tc.want, tc.e.IsTerminal(), "%s %s", tc.e.Type, tc.e.Data)
	}
}

// Event types are stored in every tree's log and read back by later
// builds and by clients: a type's name never changes. A new type is added
// here; a changed name must be a new version (@2), not an edit.
func TestEventTypeNamesAreStable(t *testing.T) {
	for typ, want := range map[event.Type]string{
		event.SessionCreated:       "session.created@1",
		event.PromptAdmitted:       "session.prompt.admitted@1",
		event.PromptCancelled:      "session.prompt.cancelled@1",
		event.MessageAdded:         "session.message.added@1",
		event.ExecutionStarted:     "session.execution.started@1",
		event.ExecutionResumed:     "session.execution.resumed@1",
		event.ExecutionSucceeded:   "session.execution.succeeded@1",
		event.ExecutionFailed:      "session.execution.failed@1",
		event.ExecutionInterrupted: "session.execution.interrupted@1",
		event.Progress:             "session.execution.progress@1",
		event.JobStarted:           "session.job.started@1",
		event.JobEnded:             "session.job.ended@1",
		event.TaskResolved:         "session.task.resolved@1",
		event.TaskCancelled:        "session.task.cancelled@1",
		event.StepStarted:          "session.step.started@1",
		event.TextCheckpoint:       "session.text.checkpoint@1",
		event.StepCompleted:        "session.step.completed@1",
		event.StepCut:              "session.step.cut@1",
		event.ToolExecuting:        "session.tool.executing@1",
		event.ToolSettled:          "session.tool.settled@1",
		event.RetryScheduled:       "session.retry.scheduled@1",
		event.StepParked:           "session.step.parked@1",
		event.QuestionAnswered:     "session.question.answered@1",
		event.QuestionCancelled:    "session.question.cancelled@1",
		event.PermissionApproved:   "session.permission.approved@1",
		event.PermissionRejected:   "session.permission.rejected@1",
		event.PermissionCancelled:  "session.permission.cancelled@1",
		event.PermissionRuleSaved:  "session.permission.rule_saved@1",
		event.TextDelta:            "session.text.delta@1",
	} {
		assert.Equal(t, want, string(typ))
	}
}

// An event with Seq 0 was only published live; a stored one has a Seq.
func TestIsEphemeral(t *testing.T) {
	assert.True(t, event.Event{Type: event.TextDelta}.IsEphemeral())
	assert.False(t, event.Event{Type: event.MessageAdded, Seq: 7}.IsEphemeral())
}
