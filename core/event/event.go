package event

import (
	"encoding/json"
	"fmt"
)

// Type is a versioned event type name.
type Type string

// Durable event types.
const (
	SessionCreated  Type = "session.created@1"
	PromptAdmitted  Type = "session.prompt.admitted@1"
	PromptCancelled Type = "session.prompt.cancelled@1"
	MessageAdded    Type = "session.message.added@1"

	ExecutionStarted     Type = "session.execution.started@1"
	ExecutionResumed     Type = "session.execution.resumed@1"
	ExecutionSucceeded   Type = "session.execution.succeeded@1"
	ExecutionFailed      Type = "session.execution.failed@1"
	ExecutionInterrupted Type = "session.execution.interrupted@1"

	// Progress is recorded by a driver when its execution made progress that
	// a resume must not redo (DESIGN §6.6). The turn runner records richer
	// events; this one lets any driver reset the budget explicitly.
	Progress Type = "session.execution.progress@1"

	JobStarted Type = "session.job.started@1"
	JobEnded   Type = "session.job.ended@1"
)

// Event is one durable entry of a session's log.
type Event struct {
	ID        string          `json:"id"`
	SessionID string          `json:"session_id"`
	Seq       int64           `json:"seq"`
	Type      Type            `json:"type"`
	At        int64           `json:"at"` // ms since the Unix epoch
	Data      json.RawMessage `json:"data"`
}

// Decode unmarshals the event's payload into v.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s event %s: %w", e.Type, e.ID, err)
	}
	return nil
}

// IsTerminal reports whether e ends a turn. An interrupt with reason
// shutdown does not: it keeps the claim and the turn resumes.
func (e Event) IsTerminal() bool {
	switch e.Type {
	case ExecutionSucceeded, ExecutionFailed:
		return true
	case ExecutionInterrupted:
		var d Interrupted
		return e.Decode(&d) == nil && d.Reason != ReasonShutdown
	}
	return false
}

// Interrupt reasons.
const (
	ReasonUser       = "user"
	ReasonSuperseded = "superseded"
	ReasonShutdown   = "shutdown"
)

// Failure types of session.execution.failed.
const (
	FailAborted   = "aborted"    // resume budget spent, or claim too old
	FailStepLimit = "step_limit" // the durable step cap was reached
	FailStorage   = "storage"    // writes could not be saved
	FailModel     = "model"      // the model provider failed for good
	FailDriver    = "driver"     // the driver reported a failure
)

// Execution start causes.
const (
	CausePrompt     = "prompt"     // a queued prompt's turn begins
	CauseResume     = "resume"     // a dead execution's turn continues
	CauseRetry      = "retry"      // a scheduled provider retry came due
	CauseResolution = "resolution" // the last blocker of a parked step was answered
)

// Prompt modes.
const (
	ModeQueue   = "queue"
	ModeReplace = "replace"
)

// Message roles in the transcript.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleNotice    = "notice"
)

// ContinuationNotice is added to the transcript before a resumed execution.
const ContinuationNotice = "The previous run was interrupted. Continue from where you left off without repeating completed work."

// Payloads.
type (
	Created struct {
		ParentID  string          `json:"parent_id,omitempty"`
		RootID    string          `json:"root_id"`
		Principal string          `json:"principal"`
		Config    json.RawMessage `json:"config"`
	}
	Admitted struct {
		PromptID string `json:"prompt_id"`
		ClientID string `json:"client_id,omitempty"`
		Text     string `json:"text"`
		Mode     string `json:"mode"`
		BodyHash string `json:"body_hash"`
	}
	Cancelled struct {
		PromptID string `json:"prompt_id"`
		Reason   string `json:"reason"`
	}
	Message struct {
		MessageID string `json:"message_id"`
		PromptID  string `json:"prompt_id,omitempty"`
		Role      string `json:"role"`
		Text      string `json:"text"`
	}
	Started struct {
		ExecutionID string `json:"execution_id"`
		PromptID    string `json:"prompt_id"`
		Cause       string `json:"cause"`
		TurnStart   bool   `json:"turn_start,omitempty"`
	}
	Resumed struct {
		ExecutionID string `json:"execution_id"` // the execution that died
		PromptID    string `json:"prompt_id"`
		Attempt     int    `json:"attempt"`
	}
	Succeeded struct {
		ExecutionID string `json:"execution_id"`
		PromptID    string `json:"prompt_id"`
	}
	Failed struct {
		ExecutionID string `json:"execution_id,omitempty"`
		PromptID    string `json:"prompt_id"`
		Type        string `json:"type"`
		Message     string `json:"message"`
	}
	Interrupted struct {
		ExecutionID string `json:"execution_id,omitempty"`
		PromptID    string `json:"prompt_id"`
		Reason      string `json:"reason"`
	}
	ProgressMade struct {
		ExecutionID string `json:"execution_id"`
		What        string `json:"what"`
	}
	Job struct {
		ChildID string `json:"child_id"`
		CallID  string `json:"call_id"`
	}
)
