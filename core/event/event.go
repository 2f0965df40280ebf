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

	// A foreground task call waits for its child as a blocker of kind
	// KindTask (DESIGN §10): TaskResolved is written in the child's turn
	// terminal transaction, carrying how the turn ended; TaskCancelled when
	// the parent's turn is interrupted while it waits.
	TaskResolved  Type = "session.task.resolved@1"
	TaskCancelled Type = "session.task.cancelled@1"

	// Steps: one model request each. started is written before the request;
	// checkpoints carry the text streamed since the previous one; completed
	// records the whole answer (progress); cut marks a step whose stream
	// ended without completing, keeping its checkpointed text.
	StepStarted    Type = "session.step.started@1"
	TextCheckpoint Type = "session.text.checkpoint@1"
	StepCompleted  Type = "session.step.completed@1"
	StepCut        Type = "session.step.cut@1"

	// Tool calls: executing is written before the body runs, with the
	// idempotency key; settled records the result.
	ToolExecuting Type = "session.tool.executing@1"
	ToolSettled   Type = "session.tool.settled@1"

	// RetryScheduled records that the turn sleeps until At before asking
	// the model again (a 429 or 5xx). The claim stays, carrying retry_at;
	// the wait survives eviction and is not a resume.
	RetryScheduled Type = "session.retry.scheduled@1"

	// Durable waits (DESIGN §9). StepParked lists, in one event, every
	// blocker of a step whose calls wait for a person: it is also the
	// "asked" event of each question (there is no separate one). The
	// turn's execution ends with it and the claim is released.
	// QuestionAnswered and QuestionCancelled resolve one question each; a
	// client applying parked / answered / cancelled to the snapshot's
	// blockers has the pending set.
	StepParked        Type = "session.step.parked@1"
	QuestionAnswered  Type = "session.question.answered@1"
	QuestionCancelled Type = "session.question.cancelled@1"
	// A permission request (kind permission, listed by StepParked like a
	// question: there is no separate "asked" event) is resolved by exactly
	// one of PermissionApproved (a once or always reply, or another
	// request's always reply that now covers it: Reason ApprovedAlways),
	// PermissionRejected (a reject reply, with or without a message) and
	// PermissionCancelled (an interrupt, or a sibling's reject or cancel).
	// PermissionRuleSaved records one rule an always reply saved for the
	// tree, apart from the decision itself.
	PermissionApproved  Type = "session.permission.approved@1"
	PermissionRejected  Type = "session.permission.rejected@1"
	PermissionCancelled Type = "session.permission.cancelled@1"
	PermissionRuleSaved Type = "session.permission.rule_saved@1"
)

// Ephemeral event types: published to live subscribers only, never stored.
// They have Seq 0 and no id; a client that misses them loses nothing durable.
const (
	TextDelta Type = "session.text.delta@1"
)

// IsEphemeral reports whether e was published live without being stored.
func (e Event) IsEphemeral() bool { return e.Seq == 0 }

// Event is one durable entry of a session's log.
type Event struct {
	ID        string          `json:"id,omitempty"` // empty only on ephemeral events
	SessionID string          `json:"session_id"`
	Seq       int64           `json:"seq,omitempty"` // 0 only on ephemeral events
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
	// ReasonOrphaned cancels the queued prompts of a sub-agent whose parent
	// no longer waits for it.
	ReasonOrphaned = "orphaned"
)

// Failure types of session.execution.failed.
const (
	FailAborted   = "aborted"    // resume budget spent, or claim too old
	FailStepLimit = "step_limit" // the durable step cap was reached
	FailStorage   = "storage"    // writes could not be saved
	FailModel     = "model"      // the model provider failed for good
	FailDriver    = "driver"     // the driver reported a failure
	// FailModelNotAllowed: the session's model is not among the server's
	// allowed models (a session stored before the operator narrowed them);
	// no model request was made.
	FailModelNotAllowed = "model_not_allowed"
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

// ContinuationNotice is added to the transcript before a resumed execution,
// unless the turn's final answer (a step completed without tool calls) is
// recorded: that execution only ends the turn and asks the model nothing.
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
		ChildID    string `json:"child_id"`
		CallID     string `json:"call_id"`
		Background bool   `json:"background,omitempty"`
	}
	StepBegun struct {
		StepID      string `json:"step_id"`
		ExecutionID string `json:"execution_id"`
		PromptID    string `json:"prompt_id"`
		Index       int    `json:"index"` // 1-based within the turn
	}
	Checkpoint struct {
		StepID string `json:"step_id"`
		Offset int    `json:"offset"` // bytes of the step's text before Text
		Text   string `json:"text"`
	}
	StepDone struct {
		StepID       string     `json:"step_id"`
		Text         string     `json:"text"`
		ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
		Finish       string     `json:"finish"`
		InputTokens  int        `json:"input_tokens"`
		OutputTokens int        `json:"output_tokens"`
	}
	Delta struct {
		StepID string `json:"step_id"`
		Text   string `json:"text"`
	}
	Cut struct {
		StepID string `json:"step_id"`
		Text   string `json:"text"`   // the checkpointed text kept
		Reason string `json:"reason"` // CutStopped, CutInterrupted, or the failure's message
	}
	ToolCall struct {
		CallID    string `json:"call_id"` // minted by revenant
		Index     int    `json:"index"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	Executing struct {
		CallID         string `json:"call_id"`
		IdempotencyKey string `json:"idempotency_key"`
	}
	Settled struct {
		CallID  string `json:"call_id"`
		Outcome string `json:"outcome"` // ok, error, interrupted, declined
		Output  string `json:"output"`
		// Ran is true when the tool body returned: progress. Settlements made
		// by recovery (an interrupted non-idempotent call) are not.
		Ran bool `json:"ran"`
		// KVPuts are the call's effects inside the tree's database, applied
		// by the projector in the settlement's transaction: exactly once.
		KVPuts []KVPut `json:"kv_puts,omitempty"`
	}
	KVPut struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	// Parked is session.step.parked@1.
	Parked struct {
		StepID      string    `json:"step_id"`
		ExecutionID string    `json:"execution_id"`
		PromptID    string    `json:"prompt_id"`
		Blockers    []Blocker `json:"blockers"`
	}
	// Blocker is one question or permission request of a parked step.
	Blocker struct {
		ID      string          `json:"id"`   // q-<call id>-<ordinal>
		Kind    string          `json:"kind"` // KindQuestion
		CallID  string          `json:"call_id"`
		Ordinal int             `json:"ordinal"`
		Adapter string          `json:"adapter"` // the continuation's versioned adapter, e.g. question@1
		Request json.RawMessage `json:"request"` // what is asked; its shape is the adapter's
	}
	// Resolution resolves one blocker: the answered and cancelled events of
	// its kind. ResponseID is the reply's idempotency key (empty when an
	// interrupt cancelled it); Reply is the reply as the adapter reads it.
	Resolution struct {
		BlockerID  string          `json:"blocker_id"`
		CallID     string          `json:"call_id"`
		StepID     string          `json:"step_id"`
		ResponseID string          `json:"response_id,omitempty"`
		Reply      json.RawMessage `json:"reply,omitempty"`
		Reason     string          `json:"reason,omitempty"` // cancelled: CancelReply, CancelInterrupt, CancelSibling; approved: ApprovedAlways
	}
	// RuleSaved is session.permission.rule_saved@1: a permission rule the
	// tree keeps (package core/permission's Rule), saved by an always reply
	// to BlockerID. RuleID is the blocker's id and the rule's ordinal.
	RuleSaved struct {
		RuleID    string `json:"rule_id"`
		BlockerID string `json:"blocker_id"`
		Action    string `json:"action"`
		Resource  string `json:"resource"`
		Decision  string `json:"decision"`
		Exact     bool   `json:"exact,omitempty"`
	}
	Retry struct {
		ExecutionID string `json:"execution_id"`
		PromptID    string `json:"prompt_id"`
		At          int64  `json:"at"`      // ms: when the model is asked again
		Attempt     int    `json:"attempt"` // 1 for the first retry of this step
		Reason      string `json:"reason"`
	}
)

// Blocker kinds.
const (
	KindQuestion   = "question"
	KindPermission = "permission"
	KindTask       = "task" // a foreground sub-agent: resolved by its turn's end, never by a reply
)

// ApprovedAlways is the Reason of a permission request approved by another
// request's always reply (it has no response_id of its own).
const ApprovedAlways = "always"

// Why a blocker was cancelled.
const (
	CancelReply     = "reply"     // a reply asked to cancel it
	CancelSibling   = "sibling"   // a reply cancelled another blocker of its step
	CancelInterrupt = "interrupt" // the turn was interrupted (or superseded) while it waited
)

// Why a step was cut, unless a model or watchdog failure says why.
const (
	CutStopped     = "stopped"     // its execution stopped it mid-stream
	CutInterrupted = "interrupted" // its execution died mid-stream; a later one cut it
)

// Tool call outcomes.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"
	OutcomeInterrupted = "interrupted"
	// OutcomeDeclined: the call never ran, refused by a permission rule
	// (deny) or by the person asked (a reject reply).
	OutcomeDeclined = "declined"
)

// Phase is a tool call's phase in the tool_calls projection (DESIGN §7):
// called → [waiting →] executing → settled. DESIGN §7's authorizing
// phase is not stored: authorization (core/runner/authorize.go) runs while
// the call is called, before any side effect, and ends in waiting (an
// ask), executing or settled (a deny); a resumed call still called
// re-enters it with the same request ids, as DESIGN says of both.
type Phase string

// Tool call phases. waiting belongs to durable waits.
const (
	PhaseCalled    Phase = "called"
	PhaseWaiting   Phase = "waiting"
	PhaseExecuting Phase = "executing" // written before the side effect
	PhaseSettled   Phase = "settled"
)

// RoleTool is a tool result in the transcript.
const RoleTool = "tool"
