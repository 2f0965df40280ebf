package tool

import (
	"bytes"
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

// ParseTask reads a call's arguments strictly: a JSON object with exactly
// the keys "prompt" and, optionally, "background", each once. Go's decoder
// alone would take "Background" for "background" and the last of two
// duplicates, so two readers could see two different calls; a strict
// reading leaves one, and the model a clear error to correct.
func (task) ParseTask(args json.RawMessage) (TaskArgs, error) {
	var a TaskArgs
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil || fields == nil {
		return a, fmt.Errorf(`task: arguments must be a JSON object {"prompt": "...", "background": false}`)
	}
	if err := uniqueKeys(args); err != nil {
		return a, err
	}
	// One error, the same every time: the keys are read in sorted order,
	// and every key but these two is an error, so of the unknown keys only
	// the least is read (found without sorting the model's keys).
	var keys []string
	for _, k := range []string{"background", "prompt"} {
		if _, ok := fields[k]; ok {
			keys = append(keys, k)
		}
	}
	unknown, hasUnknown := "", false
	for k := range fields {
		if k != "background" && k != "prompt" && (!hasUnknown || k < unknown) {
			unknown, hasUnknown = k, true
		}
	}
	if hasUnknown {
		keys = append(keys, unknown)
		for i := len(keys) - 1; i > 0 && keys[i-1] > keys[i]; i-- {
			keys[i-1], keys[i] = keys[i], keys[i-1]
		}
	}
	for _, k := range keys {
		v := fields[k]
		var err error
		switch k {
		case "prompt":
			err = json.Unmarshal(v, &a.Prompt)
		case "background":
			err = json.Unmarshal(v, &a.Background)
		default:
			return a, fmt.Errorf(`task: unknown argument %q: the arguments are "prompt" and "background"`, k)
		}
		if err != nil || string(v) == "null" {
			return a, fmt.Errorf("task: argument %q has the wrong type: %s", k, v)
		}
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return a, errors.New("task: the prompt is empty")
	}
	return a, nil
}

// uniqueKeys refuses an object that names one key twice (exactly as
// written: an unknown spelling is refused by ParseTask).
func uniqueKeys(args json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	if _, err := dec.Token(); err != nil { // {
		return fmt.Errorf("task: read arguments: %w", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("task: read arguments: %w", err)
		}
		k, _ := tok.(string)
		if seen[k] {
			return fmt.Errorf("task: argument %q is given twice", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("task: read arguments: %w", err)
		}
	}
	return nil
}
