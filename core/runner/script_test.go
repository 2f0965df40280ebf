package runner_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
)

// scriptModel answers step k of a turn (k = tool results in the request + 1)
// from a script, counting requests per step. recorded, when set, is asked at
// request time whether step k is already recorded complete: requesting it
// again would be a violation.
type scriptModel struct {
	mu         sync.Mutex
	steps      func(k int) scriptStep
	requests   map[int]int
	recorded   func(k int) bool
	violations []string
	lastReq    model.Request
}

type scriptStep struct {
	chunks []model.Chunk
	feed   chan model.Chunk // when set, chunks come from here until closed
	stall  bool             // after the chunks, send nothing until cancelled
}

func (m *scriptModel) Name() string { return "script" }

func (m *scriptModel) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	k := 1
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool {
			k++
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests == nil {
		m.requests = map[int]int{}
	}
	m.requests[k]++
	m.lastReq = req
	if m.recorded != nil && m.recorded(k) {
		m.violations = append(m.violations, fmt.Sprintf("step %d requested after it was recorded", k))
	}
	s := m.steps(k)
	return &scriptStream{s: s}, nil
}

func (m *scriptModel) Requests(k int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[k]
}

type scriptStream struct {
	s scriptStep
	i int
}

func (s *scriptStream) Recv(ctx context.Context) (model.Chunk, error) {
	if s.s.feed != nil {
		select {
		case c, ok := <-s.s.feed:
			if !ok {
				return model.Chunk{}, io.EOF
			}
			return c, nil
		case <-ctx.Done():
			return model.Chunk{}, ctx.Err()
		}
	}
	if s.i < len(s.s.chunks) {
		s.i++
		return s.s.chunks[s.i-1], nil
	}
	if s.s.stall {
		<-ctx.Done()
		return model.Chunk{}, ctx.Err()
	}
	return model.Chunk{}, io.EOF
}

func (s *scriptStream) Close() error { return nil }

// toolCall is the chunks of an answer that calls one tool, with arguments
// split across deltas and a provider id that is reused on purpose.
func toolCall(name, args string) []model.Chunk {
	half := len(args) / 2
	return []model.Chunk{
		{ToolCall: &model.ToolCallDelta{Index: 0, ID: "call_0", Name: name, Arguments: args[:half]}},
		{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: args[half:]}},
		{Finish: model.FinishToolCalls, Usage: &model.Usage{InputTokens: 10, OutputTokens: 3}},
	}
}

func text(words ...string) []model.Chunk {
	var out []model.Chunk
	for _, w := range words {
		out = append(out, model.Chunk{Text: w})
	}
	return append(out, model.Chunk{Finish: model.FinishStop})
}

// onPromptModel answers the user prompt prompt with the chunks of script
// and anything else with "ok", keeping the last request it was sent: a
// session whose one scripted turn sets a case up, and whose later turns'
// requests show what the model is told of it.
type onPromptModel struct {
	prompt string
	script []model.Chunk

	mu   sync.Mutex
	last model.Request
}

func (m *onPromptModel) Name() string { return "on-prompt" }

func (m *onPromptModel) Stream(_ context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = req
	if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleUser && last.Text == m.prompt {
		return &scriptStream{s: scriptStep{chunks: m.script}}, nil
	}
	return &scriptStream{s: scriptStep{chunks: text("ok")}}, nil
}

// Last is the last request the model was sent.
func (m *onPromptModel) Last() model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// ledger counts executions and effects of tool calls by idempotency key.
type ledger struct {
	mu         sync.Mutex
	executions map[string]int // tool name → bodies run
	effects    map[string]int // idempotency key → effects applied
}

func newLedger() *ledger {
	return &ledger{executions: map[string]int{}, effects: map[string]int{}}
}

// tool returns a ledger tool. An idempotent one applies its effect once per
// key however often it runs; a non-idempotent one applies it every time.
func (l *ledger) tool(name string, idempotent bool) tool.Tool {
	return tool.Func{DefaultPermission: "allow", Name: name, IsIdempotent: idempotent, Run: func(ctx context.Context, c tool.Call) (string, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.executions[name]++
		if !idempotent || l.effects[c.IdempotencyKey] == 0 {
			l.effects[c.IdempotencyKey]++
		}
		return name + " done", nil
	}}
}

func (l *ledger) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.executions[name]
}

func newRunner(t testing.TB, m model.Model, cfg runner.Config, tools ...tool.Tool) *runner.Runner {
	reg, err := tool.NewRegistry(tools...)
	require.NoError(t, err)
	r, err := runner.New(m, reg, cfg)
	require.NoError(t, err)
	return r
}

var _ core.Driver = (*runner.Runner)(nil)

func chunkText(s string) model.Chunk { return model.Chunk{Text: s} }

func chunkStop() model.Chunk { return model.Chunk{Finish: model.FinishStop} }

// toolTexts is the text of every tool result in req, in order.
func toolTexts(req model.Request) []string {
	var out []string
	for _, msg := range req.Messages {
		if msg.Role == model.RoleTool {
			out = append(out, msg.Text)
		}
	}
	return out
}

// awaitEvent reads sub until an event matches and returns it. A test whose
// event never comes fails after 30 s instead of hanging to the package's
// deadline; a subscription closed first fails it at once.
func awaitEvent(t testing.TB, sub *core.Subscription, match func(event.Event) bool) event.Event {
	t.Helper()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatal("the subscription closed before the awaited event")
			}
			if match(ev) {
				return ev
			}
		case <-limit.C:
			t.Fatal("the awaited event did not come within 30 s")
		}
	}
}
