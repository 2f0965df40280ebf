package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/revenantrt/revenant/core/model"
)

// Subagent is implemented by the task tool: the runner runs its calls
// itself, as a child session of the tree (core/job.go), since a body that
// only sees its Call cannot create sessions.
type Subagent interface {
	Tool
	// ParseTask reads a call's arguments.
	ParseTask(args json.RawMessage) (TaskArgs, error)
}

// TaskArgs are a task call's arguments.
type TaskArgs struct {
	Prompt     string `json:"prompt"`
	Background bool   `json:"background"`
}

type task struct{}

// Task is the task tool: {prompt, background?} starts a sub-agent.
func Task() Subagent { return task{} }

var errTaskByRunner = errors.New("the task tool runs as a sub-agent; the runner calls it")

func (task) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "task",
		Description: "Delegate work to a sub-agent: a new session of this tree that answers the prompt. " +
			"In the foreground the call returns the sub-agent's answer; with background true it returns at once " +
			"and the answer arrives later as a new message.",
		Schema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"what the sub-agent should do"},` +
			`"background":{"type":"boolean","description":"return at once; the result arrives as a later message"}},"required":["prompt"]}`)}
}

// Idempotent: a re-run call re-attaches to the child its first run made.
func (task) Idempotent() bool { return true }

func (task) Resources(json.RawMessage) ([]string, error) { return []string{"tool:task"}, nil }

// Limits: the defaults. A foreground call parks instead of waiting in its
// body, and a background one only starts its child.
func (task) Limits() Limits { return Limits{} }

func (task) Execute(context.Context, Call) (string, error) { return "", errTaskByRunner }

func (task) ParseTask(args json.RawMessage) (TaskArgs, error) {
	var a TaskArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return a, fmt.Errorf("task: arguments must be a JSON object with a prompt: %v", err)
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return a, errors.New("task: the prompt is empty")
	}
	return a, nil
}
