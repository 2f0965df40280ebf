package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
)

// Blocking is implemented by tools whose calls wait for a person before
// they settle (DESIGN §9). The runner never calls Execute for them: after
// the step's other calls settled, it parks the step with the blockers Ask
// returns, and the call continues from the committed resolution through the
// blocker's versioned adapter.
type Blocking interface {
	Tool
	// Ask returns the call's blockers in ordinal order, or an error (the
	// arguments do not make a question) that settles the call as failed
	// for the model to correct, without waiting.
	Ask(args json.RawMessage) ([]Ask, error)
}

// Ask is one blocker a call raises.
type Ask struct {
	Kind    string          // event.KindQuestion
	Adapter string          // e.g. QuestionAdapter
	Request json.RawMessage // what is asked, in the adapter's shape
}

// QuestionAdapter names the continuation of question blockers.
const QuestionAdapter = "question@1"

// QuestionName is the question tool's name.
const QuestionName = "question"

// Limits of a question call.
const (
	MaxQuestions   = 10
	MaxChoices     = 20
	MaxQuestionLen = 4 << 10
	MaxChoiceLen   = 1 << 10 // a choice is a short answer, shown as a button or list item
)

// Question is one question of a question call.
type Question struct {
	Question string `json:"question"`
	// Choices, if any, are the answers offered; without them the answer is
	// free text.
	Choices []string `json:"choices,omitempty"`
	// Multiple lets the person pick more than one choice.
	Multiple bool `json:"multiple,omitempty"`
}

// QuestionRequest is the request of a question blocker (question@1): the
// call's arguments, checked.
type QuestionRequest struct {
	Questions []Question `json:"questions"`
}

// ParseQuestions reads and checks a question call's arguments.
func ParseQuestions(args json.RawMessage) (QuestionRequest, error) {
	var req QuestionRequest
	if err := json.Unmarshal(args, &req); err != nil {
		return req, fmt.Errorf("the arguments must be {\"questions\": [{\"question\": \"…\", \"choices\": [\"…\"], \"multiple\": false}]}: %w", err)
	}
	if len(req.Questions) == 0 || len(req.Questions) > MaxQuestions {
		return req, fmt.Errorf("ask from 1 to %d questions, not %d", MaxQuestions, len(req.Questions))
	}
	for i, q := range req.Questions {
		switch {
		case strings.TrimSpace(q.Question) == "":
			return req, fmt.Errorf("question %d is empty", i+1)
		case len(q.Question) > MaxQuestionLen:
			return req, fmt.Errorf("question %d is longer than %d bytes", i+1, MaxQuestionLen)
		case len(q.Choices) > MaxChoices:
			return req, fmt.Errorf("question %d offers more than %d choices", i+1, MaxChoices)
		case q.Multiple && len(q.Choices) == 0:
			return req, fmt.Errorf("question %d allows multiple answers but offers no choices", i+1)
		}
		seen := map[string]bool{}
		for _, c := range q.Choices {
			if strings.TrimSpace(c) == "" || seen[c] {
				return req, fmt.Errorf("question %d offers an empty or repeated choice", i+1)
			}
			if len(c) > MaxChoiceLen {
				return req, fmt.Errorf("question %d offers a choice longer than %d bytes", i+1, MaxChoiceLen)
			}
			seen[c] = true
		}
	}
	return req, nil
}

type question struct{}

// QuestionTool asks the person one or more questions and waits, durably,
// for the answers: the question tool every host registers.
func QuestionTool() Tool { return question{} }

var questionSchema = json.RawMessage(`{"type":"object","properties":{"questions":{"type":"array","minItems":1,"maxItems":10,"items":{"type":"object","properties":{"question":{"type":"string"},"choices":{"type":"array","items":{"type":"string"}},"multiple":{"type":"boolean"}},"required":["question"]}}},"required":["questions"]}`)

func (question) Spec() model.ToolSpec {
	return model.ToolSpec{Name: QuestionName, Schema: questionSchema,
		Description: "Ask the user one or more questions and wait for the answers. Offer choices when the answer is one of a few; set multiple to let the user pick several."}
}

func (question) Idempotent() bool { return true }

func (question) Resources(json.RawMessage) ([]string, error) {
	return []string{"tool:" + QuestionName}, nil
}

func (question) Limits() Limits { return Limits{} }

var errBlocking = errors.New("the question tool waits for a person; the runner parks it instead of executing it")

func (question) Execute(context.Context, Call) (string, error) { return "", errBlocking }

func (question) Ask(args json.RawMessage) ([]Ask, error) {
	req, err := ParseQuestions(args)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode questions: %w", err)
	}
	return []Ask{{Kind: event.KindQuestion, Adapter: QuestionAdapter, Request: b}}, nil
}

// Defaults are the tools every host registers: the tree's key-value store
// (kv_get, kv_put), the question tool and the task tool (sub-agents). Hosts
// add their egress tools.
func Defaults() []Tool { return []Tool{KVGet(), KVPut(), QuestionTool(), Task()} }
