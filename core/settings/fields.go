package settings

import "time"

// Names of the fields that Validate checks across fields.
const (
	nameRetryInitial    = "retry_initial"
	nameWakeInterval    = "wake_interval"
	nameSessionPageSize = "session_page_size"
	nameMessagePageSize = "message_page_size"
	nameMaxBody         = "max_body"
	nameHeartbeat       = "heartbeat"
	nameStreamIdle      = "stream_idle"
	nameCheckpointEvery = "checkpoint_every"
	nameStepWall        = "step_wall"
	nameToolTimeout     = "tool_timeout"
	nameRetryMax        = "retry_max"
	nameMaxRetryAfter   = "max_retry_after"
	nameInterruptGrace  = "interrupt_grace"
	nameMaxClaimAge     = "max_claim_age"
	nameQueueCap        = "queue_cap"
)

// Field is one setting as a configuration file names it, pointing into a
// Settings: exactly one of Int, Int64 and Duration is set. A file gives a
// duration as a Go duration string ("30s") and the rest as integers.
type Field struct {
	Name     string
	Int      *int
	Int64    *int64
	Duration *time.Duration
	// NoneAllowed: the field takes None, which a file writes as 0 (a file
	// leaves a key out for the default, so its 0 can mean zero).
	NoneAllowed bool
}

// Fields lists every field of s, in declaration order, pointing into s: a
// configuration reader sets them by name, and Validate's errors use the
// same names.
func (s *Settings) Fields() []Field {
	return []Field{
		{Name: "resume_budget", Int: &s.ResumeBudget, NoneAllowed: true},
		{Name: nameMaxClaimAge, Duration: &s.MaxClaimAge},
		{Name: nameWakeInterval, Duration: &s.WakeInterval},
		{Name: nameInterruptGrace, Duration: &s.InterruptGrace},
		{Name: nameQueueCap, Int: &s.QueueCap},
		{Name: "step_cap", Int: &s.StepCap},
		{Name: nameStreamIdle, Duration: &s.StreamIdle},
		{Name: nameStepWall, Duration: &s.StepWall},
		{Name: nameToolTimeout, Duration: &s.ToolTimeout},
		{Name: "tool_output_cap", Int: &s.ToolOutputCap},
		{Name: nameCheckpointEvery, Duration: &s.CheckpointEvery},
		{Name: "checkpoint_bytes", Int: &s.CheckpointBytes},
		{Name: "model_retries", Int: &s.ModelRetries, NoneAllowed: true},
		{Name: nameRetryInitial, Duration: &s.RetryInitial},
		{Name: nameRetryMax, Duration: &s.RetryMax},
		{Name: "context_bytes", Int: &s.ContextBytes},
		{Name: "max_subagents", Int: &s.MaxSubagents},
		{Name: nameMaxRetryAfter, Duration: &s.MaxRetryAfter},
		{Name: nameHeartbeat, Duration: &s.Heartbeat},
		{Name: nameMaxBody, Int64: &s.MaxBody},
		{Name: nameSessionPageSize, Int: &s.SessionPageSize},
		{Name: nameMessagePageSize, Int: &s.MessagePageSize},
	}
}
