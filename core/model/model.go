package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Roles of request messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
)

// Request is one model call.
type Request struct {
	Model    string
	System   string
	Messages []Message
	Tools    []ToolSpec
}

// Message is one transcript entry sent to the model.
type Message struct {
	Role       string
	Text       string
	ToolCalls  []ToolCall // assistant messages that asked for tools
	ToolCallID string     // tool messages: the call answered
	Name       string     // tool messages: the tool's name
	// Notice marks a user message revenant adds, not the user: the
	// continuation notice recovery adds before a resumed execution, or the
	// notice that earlier messages were left out to fit the context
	// (runner.OmittedNotice). Providers send it as a plain user message.
	Notice bool
}

// ToolCall is a complete tool call.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// Chunk is one piece of a streamed answer. Any field may be empty.
type Chunk struct {
	Text     string
	ToolCall *ToolCallDelta
	Usage    *Usage
	Finish   string
}

// ToolCallDelta is part of the Index-th tool call of the answer. ID and Name
// usually come in the first delta of a call; Arguments accumulate.
type ToolCallDelta struct {
	Index     int
	ID        string // the provider's id: informational only, never trusted
	Name      string
	Arguments string
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int
	OutputTokens int
}

// Stream is an answer being received. A consumer reads until io.EOF: the
// finish reason and usage may come in any order before it. After Recv
// returns an error, later calls return an error too. Close may be called at
// any time, also while Recv waits, which then returns an error.
type Stream interface {
	// Recv returns the next chunk, or io.EOF after the last one. It returns
	// ctx's error promptly when ctx ends.
	Recv(ctx context.Context) (Chunk, error)
	Close() error
}

// Model starts streamed answers.
type Model interface {
	// Name identifies the model in logs and events.
	Name() string
	Stream(ctx context.Context, req Request) (Stream, error)
}

// Error is a model failure. Retryable failures (429, 5xx) carry RetryAfter
// when the provider said how long to wait.
type Error struct {
	Status     int // HTTP status, 0 if none
	Retryable  bool
	RetryAfter time.Duration
	Msg        string
	// Err is the failure's cause, if any (a transport error), kept for
	// errors.Is and errors.As: a request the host's fence ended is
	// core.ErrFenced underneath, which a caller must tell from a provider
	// failure. Error never prints it; Msg says what happened.
	Err error
}

// Unwrap returns the failure's cause, if any.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("model error %d: %s", e.Status, e.Msg)
	}
	return "model error: " + e.Msg
}

// IsRetryable reports whether err is a model failure worth retrying later.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable
}
