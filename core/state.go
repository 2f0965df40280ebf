package core

// The states the projections store (schema migrations 0001 and 0002). They
// are written only by the projector (project.go) from events, so Rebuild
// derives the same values; everything else reads them. Tool call phases are
// event.Phase, beside the events that move them.

// PromptState is a prompt's state in the prompt queue.
type PromptState string

// Prompt states. queued and running are live; the rest are ends.
const (
	PromptQueued      PromptState = "queued"  // admitted, its turn not begun
	PromptRunning     PromptState = "running" // its turn has begun
	PromptSucceeded   PromptState = "succeeded"
	PromptFailed      PromptState = "failed"
	PromptInterrupted PromptState = "interrupted" // by the user or a replacing prompt
	PromptCancelled   PromptState = "cancelled"   // ended while queued
)

// StepState is a model step's state.
type StepState string

// Step states.
const (
	StepStarted   StepState = "started"   // requested; its text is checkpointed so far
	StepCompleted StepState = "completed" // the stream was recorded whole: never requested again
	StepCut       StepState = "cut"       // ended without completing; keeps its checkpointed text
)

// JobState is a sub-agent job's state.
type JobState string

// Job states.
const (
	JobRunning JobState = "running" // the parent waits for the child
	JobEnded   JobState = "ended"
)
