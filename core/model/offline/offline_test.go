package offline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
)

// fakeTimer records every AfterFunc call. With auto set it fires at once;
// otherwise the test fires (or sees stopped) the timers it receives from
// started.
type fakeTimer struct {
	auto    bool
	mu      sync.Mutex
	waits   []time.Duration
	started chan *pendingTimer
}

type pendingTimer struct {
	d       time.Duration
	f       func()
	mu      sync.Mutex
	done    bool
	stopped bool
}

func newFakeTimer(auto bool) *fakeTimer {
	return &fakeTimer{auto: auto, started: make(chan *pendingTimer, 16)}
}

func (ft *fakeTimer) AfterFunc(d time.Duration, f func()) func() bool {
	ft.mu.Lock()
	ft.waits = append(ft.waits, d)
	ft.mu.Unlock()
	p := &pendingTimer{d: d, f: f}
	if ft.auto {
		p.fire()
	} else {
		ft.started <- p
	}
	return p.stop
}

func (ft *fakeTimer) calls() []time.Duration {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return append([]time.Duration(nil), ft.waits...)
}

// next returns the next timer started, failing rather than hanging.
func (ft *fakeTimer) next(t *testing.T) *pendingTimer {
	t.Helper()
	select {
	case p := <-ft.started:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no timer was started")
		return nil
	}
}

func (p *pendingTimer) fire() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	p.mu.Unlock()
	p.f()
}

func (p *pendingTimer) stop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
	}
	p.done, p.stopped = true, true
	return true
}

func (p *pendingTimer) wasStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

func user(text string) model.Message { return model.Message{Role: model.RoleUser, Text: text} }

func notice() model.Message {
	return model.Message{Role: model.RoleUser, Text: "The previous run was interrupted.", Notice: true}
}

func ask(text string) model.Request { return model.Request{Messages: []model.Message{user(text)}} }

// collect reads a stream to its end.
func collect(t *testing.T, m model.Model, req model.Request) []model.Chunk {
	t.Helper()
	s, err := m.Stream(context.Background(), req)
	require.NoError(t, err)
	defer s.Close()
	var chunks []model.Chunk
	for {
		c, err := s.Recv(context.Background())
		if errors.Is(err, io.EOF) {
			return chunks
		}
		require.NoError(t, err)
		chunks = append(chunks, c)
	}
}

// answer is a stream put back together, as the turn runner would.
type answer struct {
	text   string
	calls  []model.ToolCall
	finish string
	usage  *model.Usage
}

func assemble(chunks []model.Chunk) answer {
	var a answer
	for _, c := range chunks {
		a.text += c.Text
		if d := c.ToolCall; d != nil {
			for len(a.calls) <= d.Index {
				a.calls = append(a.calls, model.ToolCall{})
			}
			call := &a.calls[d.Index]
			if d.ID != "" {
				call.ID = d.ID
			}
			if d.Name != "" {
				call.Name = d.Name
			}
			call.Arguments += d.Arguments
		}
		if c.Finish != "" {
			a.finish = c.Finish
		}
		if c.Usage != nil {
			a.usage = c.Usage
		}
	}
	return a
}

func texts(chunks []model.Chunk) []string {
	var out []string
	for _, c := range chunks {
		if c.Text != "" {
			out = append(out, c.Text)
		}
	}
	return out
}

func TestName(t *testing.T) {
	assert.Equal(t, "offline", offline.New(nil, offline.Options{}).Name())
}

func TestPure(t *testing.T) {
	reqs := []model.Request{
		ask("hello brave world"),
		ask("/tool kv_get {\"key\": \"a\"}\nwhat is a?"),
		ask("/sleep 2s\nslow one"),
		ask("/ask are you sure?"),
		{Messages: []model.Message{
			user("/tool t {}\ndone?"),
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "offline-call-0", Name: "t", Arguments: "{}"}}},
			{Role: model.RoleTool, ToolCallID: "offline-call-0", Name: "t", Text: "ok"},
		}},
	}
	for _, req := range reqs {
		// Different instances and timers must not change a byte.
		a := collect(t, offline.New(newFakeTimer(true), offline.Options{WordDelay: time.Millisecond}), req)
		b := collect(t, offline.New(newFakeTimer(true), offline.Options{WordDelay: time.Second}), req)
		assert.Equal(t, a, b)
		assert.NotEmpty(t, a)
	}
}

func TestEchoWordByWord(t *testing.T) {
	ft := newFakeTimer(true)
	req := model.Request{Messages: []model.Message{
		{Role: model.RoleSystem, Text: "be brief"},
		user("hello brave  world"),
	}}
	chunks := collect(t, offline.New(ft, offline.Options{}), req)

	assert.Equal(t, []string{"You ", "said: ", "hello ", "brave  ", "world"}, texts(chunks))
	n := len(chunks)
	require.Equal(t, 7, n)
	assert.Equal(t, model.Chunk{Finish: model.FinishStop}, chunks[n-2])
	assert.Equal(t, model.Chunk{Usage: &model.Usage{InputTokens: 5, OutputTokens: 5}}, chunks[n-1])
	assert.Empty(t, ft.calls(), "zero WordDelay must not touch the timer")
}

func TestWordDelay(t *testing.T) {
	ft := newFakeTimer(true)
	chunks := collect(t, offline.New(ft, offline.Options{WordDelay: 100 * time.Millisecond}), ask("a b"))
	assert.Equal(t, "You said: a b", assemble(chunks).text)
	// Four words, a pause between each two, none before the first.
	ms := 100 * time.Millisecond
	assert.Equal(t, []time.Duration{ms, ms, ms}, ft.calls())
}

func TestOnlyDirectives(t *testing.T) {
	chunks := collect(t, offline.New(newFakeTimer(true), offline.Options{}), ask("/sleep 1s"))
	a := assemble(chunks)
	assert.Equal(t, "OK.", a.text)
	assert.Equal(t, model.FinishStop, a.finish)
}

func TestToolSequence(t *testing.T) {
	m := offline.New(nil, offline.Options{})
	req := ask("/tool kv_put {\"key\":\"a\",\"value\":1}\n/tool kv_get\nremember a")

	steps := []struct {
		call   model.ToolCall
		result string
	}{
		{model.ToolCall{ID: "offline-call-0", Name: "kv_put", Arguments: `{"key":"a","value":1}`}, "stored"},
		{model.ToolCall{ID: "offline-call-1", Name: "kv_get", Arguments: "{}"}, "1"},
	}
	for _, st := range steps {
		a := assemble(collect(t, m, req))
		assert.Equal(t, model.FinishToolCalls, a.finish)
		assert.Empty(t, a.text)
		require.Equal(t, []model.ToolCall{st.call}, a.calls)
		require.NotNil(t, a.usage)
		req.Messages = append(req.Messages,
			model.Message{Role: model.RoleAssistant, ToolCalls: a.calls},
			model.Message{Role: model.RoleTool, ToolCallID: st.call.ID, Name: st.call.Name, Text: st.result})
	}

	a := assemble(collect(t, m, req))
	assert.Empty(t, a.calls)
	assert.Equal(t, model.FinishStop, a.finish)
	assert.Equal(t, "Tool kv_put returned: stored\nTool kv_get returned: 1\nYou said: remember a", a.text)
}

func TestToolCallDeltas(t *testing.T) {
	for _, args := range []string{`{}`, `{"a":1}`, `{"city": "Zürich", "note": "日本語のテキスト"}`} {
		t.Run(args, func(t *testing.T) {
			chunks := collect(t, offline.New(nil, offline.Options{}), ask("/tool weather "+args))
			require.NotNil(t, chunks[0].ToolCall)
			assert.Equal(t, model.ToolCallDelta{Index: 0, ID: "offline-call-0", Name: "weather"}, *chunks[0].ToolCall)

			var pieces []string
			for _, c := range chunks[1:] {
				if c.ToolCall == nil {
					continue
				}
				assert.Equal(t, 0, c.ToolCall.Index)
				assert.True(t, utf8.ValidString(c.ToolCall.Arguments), "piece cut mid-rune: %q", c.ToolCall.Arguments)
				pieces = append(pieces, c.ToolCall.Arguments)
			}
			assert.GreaterOrEqual(t, len(pieces), 2)
			assert.Equal(t, args, strings.Join(pieces, ""))

			a := assemble(chunks)
			assert.Equal(t, model.FinishToolCalls, a.finish)
			assert.Equal(t, len(pieces)+1, a.usage.OutputTokens)
		})
	}
}

// /task is a call of the task tool, queued with /tool calls in prompt
// order; --background before the prompt asks for a background sub-agent.
func TestTaskDirectiveCallsTaskTool(t *testing.T) {
	ft := newFakeTimer(true)
	a := assemble(collect(t, offline.New(ft, offline.Options{}), ask("/task summarise the log")))
	require.Len(t, a.calls, 1)
	assert.Equal(t, "task", a.calls[0].Name)
	assert.JSONEq(t, `{"prompt":"summarise the log","background":false}`, a.calls[0].Arguments)

	a = assemble(collect(t, offline.New(ft, offline.Options{}), ask("/task --background count to three")))
	require.Len(t, a.calls, 1)
	assert.JSONEq(t, `{"prompt":"count to three","background":true}`, a.calls[0].Arguments)

	a = assemble(collect(t, offline.New(ft, offline.Options{}), ask("/task --backgrounds is a word")))
	require.Len(t, a.calls, 1)
	assert.JSONEq(t, `{"prompt":"--backgrounds is a word","background":false}`, a.calls[0].Arguments)
}

func TestExplainedDirectives(t *testing.T) {
	tests := []struct {
		prompt string
		want   string
	}{
		{"/tool f {x}", "The /tool f directive needs its arguments as a JSON object, not {x}."},
		{"/tool f [1, 2]", "The /tool f directive needs its arguments as a JSON object, not [1, 2]."},
		{"/tool f null", "The /tool f directive needs its arguments as a JSON object, not null."},
		{`/tool f {"a":1} extra`, `The /tool f directive needs its arguments as a JSON object, not {"a":1} extra.`},
		{"/tool", "The /tool directive needs a tool name: /tool NAME {json}."},
		{"/sleep soon", `The /sleep directive needs a duration such as 5s or 250ms, not "soon".`},
		{"/sleep -1s", `The /sleep directive needs a duration such as 5s or 250ms, not "-1s".`},
		{"/sleep", `The /sleep directive needs a duration such as 5s or 250ms, not "".`},
		{"/ask", "The /ask directive needs a question: /ask QUESTION."},
		{"/task", "The /task directive needs a prompt: /task [--background] PROMPT."},
		{"/task --background", "The /task directive needs a prompt: /task [--background] PROMPT."},
		{"/tool ok {}\n/tool bad {\n/ask", "The /tool bad directive needs its arguments as a JSON object, not {.\n" +
			"The /ask directive needs a question: /ask QUESTION."},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			ft := newFakeTimer(true)
			a := assemble(collect(t, offline.New(ft, offline.Options{}), ask(tt.prompt)))
			assert.Equal(t, tt.want, a.text)
			assert.Empty(t, a.calls)
			assert.Equal(t, model.FinishStop, a.finish)
			assert.Empty(t, ft.calls())
		})
	}
}

func TestNotDirectives(t *testing.T) {
	// Unknown commands, paths and directive names inside a word are words.
	prompt := "/usr/bin is a path\n/toolbox is not /tool\n  /help"
	a := assemble(collect(t, offline.New(nil, offline.Options{}), ask(prompt)))
	assert.Equal(t, "You said: "+prompt, a.text)
}

func TestFail(t *testing.T) {
	tests := []struct{ prompt, msg string }{
		{"/fail", "failure requested by /fail"},
		{"hello\n/fail quota exhausted\n/tool f {}", "quota exhausted"},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			_, err := offline.New(nil, offline.Options{}).Stream(context.Background(), ask(tt.prompt))
			var me *model.Error
			require.ErrorAs(t, err, &me)
			assert.False(t, me.Retryable)
			assert.False(t, model.IsRetryable(err))
			assert.Equal(t, tt.msg, me.Msg)
		})
	}
}

func TestSleepWaitsThroughTimer(t *testing.T) {
	ft := newFakeTimer(false)
	s, err := offline.New(ft, offline.Options{}).Stream(context.Background(), ask("/sleep 5s\nhi"))
	require.NoError(t, err)
	defer s.Close()

	got := make(chan model.Chunk, 1)
	go func() {
		c, err := s.Recv(context.Background())
		assert.NoError(t, err)
		got <- c
	}()
	p := ft.next(t)
	assert.Equal(t, 5*time.Second, p.d)
	select {
	case c := <-got:
		t.Fatalf("Recv returned %+v before the timer fired", c)
	default:
	}
	p.fire()
	assert.Equal(t, model.Chunk{Text: "You "}, <-got)

	// The rest of the answer comes without waiting (no WordDelay).
	c, err := s.Recv(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "said: ", c.Text)
	assert.Equal(t, []time.Duration{5 * time.Second}, ft.calls())
}

func TestSleepCapped(t *testing.T) {
	ft := newFakeTimer(true)
	collect(t, offline.New(ft, offline.Options{}), ask("/sleep 40m\n/sleep 2540400h\nhi"))
	assert.Equal(t, offline.MaxSleep, ft.calls()[0])
}

func TestSleepNotBeforeToolCalls(t *testing.T) {
	ft := newFakeTimer(true)
	a := assemble(collect(t, offline.New(ft, offline.Options{WordDelay: time.Second}), ask("/sleep 5s\n/tool f {}")))
	require.Len(t, a.calls, 1)
	assert.Empty(t, ft.calls())
}

func TestRecvEndsWithContext(t *testing.T) {
	ft := newFakeTimer(false)
	s, err := offline.New(ft, offline.Options{}).Stream(context.Background(), ask("/sleep 1h\nhi"))
	require.NoError(t, err)
	defer s.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Recv(ctx)
		done <- err
	}()
	p := ft.next(t)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.True(t, p.wasStopped(), "the timer must be stopped")

	_, err = s.Recv(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = offline.New(ft, offline.Options{}).Stream(ctx, ask("hi"))
	assert.ErrorIs(t, err, context.Canceled)
}

func TestCloseEndsWaitingRecv(t *testing.T) {
	ft := newFakeTimer(false)
	s, err := offline.New(ft, offline.Options{}).Stream(context.Background(), ask("/sleep 1h\nhi"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := s.Recv(context.Background())
		done <- err
	}()
	p := ft.next(t)
	require.NoError(t, s.Close())
	assert.Error(t, <-done)
	assert.True(t, p.wasStopped())
}

func TestPauseWithoutTimerFails(t *testing.T) {
	s, err := offline.New(nil, offline.Options{}).Stream(context.Background(), ask("/sleep 1s\nhi"))
	require.NoError(t, err)
	_, err = s.Recv(context.Background())
	assert.Error(t, err)
}

func TestPromptSkipsContinuationNotice(t *testing.T) {
	m := offline.New(nil, offline.Options{})
	req := model.Request{Messages: []model.Message{
		user("first question"),
		{Role: model.RoleAssistant, Text: "You said: first question"},
		user("/tool f {}\nsecond"),
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "offline-call-0", Name: "f", Arguments: "{}"}}},
		{Role: model.RoleTool, ToolCallID: "offline-call-0", Name: "f", Text: "done"},
		notice(),
	}}
	a := assemble(collect(t, m, req))
	assert.Equal(t, "Tool f returned: done\nYou said: second", a.text)

	// Before the tool answered, a resume asks for the same call again.
	req.Messages = append(req.Messages[:3], notice())
	a = assemble(collect(t, m, req))
	assert.Equal(t, []model.ToolCall{{ID: "offline-call-0", Name: "f", Arguments: "{}"}}, a.calls)
}

func TestNoPrompt(t *testing.T) {
	a := assemble(collect(t, offline.New(nil, offline.Options{}), model.Request{}))
	assert.Equal(t, "OK.", a.text)
	assert.Equal(t, &model.Usage{InputTokens: 0, OutputTokens: 1}, a.usage)
}

func Example() {
	m := offline.New(nil, offline.Options{})
	s, _ := m.Stream(context.Background(), model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "hello there"},
	}})
	defer s.Close()
	for {
		c, err := s.Recv(context.Background())
		if err != nil {
			break
		}
		switch {
		case c.Text != "":
			fmt.Printf("text %q\n", c.Text)
		case c.Finish != "":
			fmt.Println("finish", c.Finish)
		case c.Usage != nil:
			fmt.Println("usage", c.Usage.InputTokens, c.Usage.OutputTokens)
		}
	}
	// Output:
	// text "You "
	// text "said: "
	// text "hello "
	// text "there"
	// finish stop
	// usage 2 4
}
