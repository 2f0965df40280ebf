package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/openai"
)

const testKey = "sk-test-0123456789abcdef-SECRET"

// fake is an OpenAI-compatible server on loopback. handle is called with
// the 0-based number of the request; every request is recorded.
type fake struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *fake {
	t.Helper()
	f := &fake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.Header.Clone(), body})
		f.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// serve answers every request with the events, then [DONE].
func serve(events ...string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeEvents(w, events...)
		writeEvents(w, "[DONE]")
	}
}

func writeEvents(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
	}
	w.(http.Flusher).Flush()
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func deltaChunk(delta map[string]any) string {
	return js(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test", "usage": nil,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}},
	})
}

func textChunk(s string) string { return deltaChunk(map[string]any{"content": s}) }

func callChunk(calls ...map[string]any) string {
	return deltaChunk(map[string]any{"tool_calls": calls})
}

// call is a tool-call delta; index < 0 leaves the index out, empty id and
// name are left out.
func call(index int, id, name, args string) map[string]any {
	fn := map[string]any{"arguments": args}
	if name != "" {
		fn["name"] = name
	}
	c := map[string]any{"function": fn}
	if index >= 0 {
		c["index"] = index
	}
	if id != "" {
		c["id"], c["type"] = id, "function"
	}
	return c
}

func finishChunk(reason string) string {
	return js(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": reason}}})
}

func usageChunk(in, out int) string {
	return js(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
}

func newModel(t *testing.T, f *fake, edit ...func(*openai.Config)) *openai.Model {
	t.Helper()
	cfg := openai.Config{BaseURL: f.srv.URL + "/v1", APIKey: testKey, Model: "gpt-test", Client: nethttp.Client(f.srv.Client())}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := openai.New(cfg)
	require.NoError(t, err)
	return m
}

func ask(text string) model.Request {
	return model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: text}}}
}

// recvAll reads s until an error and returns the chunks and that error.
func recvAll(t *testing.T, s model.Stream) ([]model.Chunk, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var chunks []model.Chunk
	for {
		c, err := s.Recv(ctx)
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, c)
	}
}

// collect streams req and reads the whole answer, which must end in io.EOF.
func collect(t *testing.T, m *openai.Model, req model.Request) []model.Chunk {
	t.Helper()
	s, err := m.Stream(t.Context(), req)
	require.NoError(t, err)
	defer s.Close()
	chunks, err := recvAll(t, s)
	require.ErrorIs(t, err, io.EOF)
	return chunks
}

// answer is a stream put back together, as the turn runner does: calls by
// delta index.
type answer struct {
	text   string
	calls  map[int]*model.ToolCall
	finish string
	usage  *model.Usage
}

func assemble(chunks []model.Chunk) answer {
	a := answer{calls: map[int]*model.ToolCall{}}
	for _, c := range chunks {
		a.text += c.Text
		if d := c.ToolCall; d != nil {
			call := a.calls[d.Index]
			if call == nil {
				call = &model.ToolCall{}
				a.calls[d.Index] = call
			}
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

func modelError(t *testing.T, err error) *model.Error {
	t.Helper()
	var e *model.Error
	require.ErrorAs(t, err, &e)
	return e
}

func TestName(t *testing.T) {
	m, err := openai.New(openai.Config{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini", Client: nethttp.Client(nil)})
	require.NoError(t, err)
	assert.Equal(t, "gpt-4o-mini", m.Name())
}

func TestTextStreaming(t *testing.T) {
	f := newFake(t, serve(
		deltaChunk(map[string]any{"role": "assistant", "content": ""}),
		textChunk("Hel"), textChunk("lo, "), textChunk("world"),
		finishChunk("stop"),
		usageChunk(12, 3),
	))
	m := newModel(t, f)
	s, err := m.Stream(t.Context(), ask("hi"))
	require.NoError(t, err)
	defer s.Close()
	chunks, err := recvAll(t, s)
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, []model.Chunk{
		{Text: "Hel"}, {Text: "lo, "}, {Text: "world"},
		{Finish: model.FinishStop},
		{Usage: &model.Usage{InputTokens: 12, OutputTokens: 3}},
	}, chunks)

	// After the end, Recv keeps saying so.
	_, err = s.Recv(t.Context())
	assert.ErrorIs(t, err, io.EOF)
}

func TestArgumentsSplitAcrossChunks(t *testing.T) {
	f := newFake(t, serve(
		callChunk(call(0, "call_abc", "kv_get", "")),
		callChunk(call(0, "", "", `{"ke`)),
		callChunk(call(0, "", "", `y": "a`)),
		callChunk(call(0, "", "", `"}`)),
		finishChunk("tool_calls"),
	))
	chunks := collect(t, newModel(t, f), ask("what is a?"))
	require.Len(t, chunks, 5)
	assert.Equal(t, &model.ToolCallDelta{Index: 0, ID: "call_abc", Name: "kv_get"}, chunks[0].ToolCall)
	assert.Equal(t, &model.ToolCallDelta{Index: 0, Arguments: `{"ke`}, chunks[1].ToolCall)
	a := assemble(chunks)
	require.Len(t, a.calls, 1)
	assert.Equal(t, model.ToolCall{ID: "call_abc", Name: "kv_get", Arguments: `{"key": "a"}`}, *a.calls[0])
	assert.Equal(t, model.FinishToolCalls, a.finish)
}

func TestTwoToolCallsInOneResponse(t *testing.T) {
	f := newFake(t, serve(
		textChunk("Let me look."),
		// Two calls in one event, then their arguments interleaved.
		callChunk(call(0, "call_1", "kv_get", `{"key":`), call(1, "call_2", "http_request", "")),
		callChunk(call(1, "", "", `{"url":"https://example.com"`)),
		callChunk(call(0, "", "", `"a"}`)),
		callChunk(call(1, "", "", `}`)),
		finishChunk("tool_calls"),
	))
	a := assemble(collect(t, newModel(t, f), ask("go")))
	assert.Equal(t, "Let me look.", a.text)
	require.Len(t, a.calls, 2)
	assert.Equal(t, model.ToolCall{ID: "call_1", Name: "kv_get", Arguments: `{"key":"a"}`}, *a.calls[0])
	assert.Equal(t, model.ToolCall{ID: "call_2", Name: "http_request", Arguments: `{"url":"https://example.com"}`}, *a.calls[1])
}

func TestProviderIDsReusedOrMissing(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		switch n {
		case 0, 1: // the same id in two answers, and twice in the second
			events := []string{callChunk(call(0, "call_0", "kv_get", `{"key":"a"}`))}
			if n == 1 {
				events = append(events, callChunk(call(1, "call_0", "kv_get", `{"key":"b"}`)))
			}
			writeEvents(w, append(events, finishChunk("tool_calls"))...)
		default: // no ids at all
			writeEvents(w,
				callChunk(call(0, "", "kv_get", `{"key":"a"}`)),
				callChunk(call(1, "", "kv_put", `{"key":"b",`)),
				callChunk(call(1, "", "", `"value":"c"}`)),
				finishChunk("tool_calls"))
		}
		writeEvents(w, "[DONE]")
	})
	m := newModel(t, f)

	first := assemble(collect(t, m, ask("one")))
	second := assemble(collect(t, m, ask("two")))
	third := assemble(collect(t, m, ask("three")))

	// Ids are passed on as the provider sent them; the index keeps calls
	// apart (the runner mints its own ids).
	require.Len(t, first.calls, 1)
	assert.Equal(t, model.ToolCall{ID: "call_0", Name: "kv_get", Arguments: `{"key":"a"}`}, *first.calls[0])
	require.Len(t, second.calls, 2)
	assert.Equal(t, `{"key":"a"}`, second.calls[0].Arguments)
	assert.Equal(t, `{"key":"b"}`, second.calls[1].Arguments)
	assert.Equal(t, "call_0", second.calls[1].ID)
	require.Len(t, third.calls, 2)
	assert.Equal(t, model.ToolCall{Name: "kv_get", Arguments: `{"key":"a"}`}, *third.calls[0])
	assert.Equal(t, model.ToolCall{Name: "kv_put", Arguments: `{"key":"b","value":"c"}`}, *third.calls[1])
}

// TestMissingIndex covers providers that leave out the index: calls are
// placed by order of appearance.
func TestMissingIndex(t *testing.T) {
	indexes := func(chunks []model.Chunk) []int {
		var out []int
		for _, c := range chunks {
			if c.ToolCall != nil {
				out = append(out, c.ToolCall.Index)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		events []string
		want   []int
		calls  []model.ToolCall
	}{{
		name: "whole calls without ids",
		events: []string{
			callChunk(call(-1, "", "kv_get", `{"key":"a"}`)),
			callChunk(call(-1, "", "kv_get", `{"key":"b"}`)),
		},
		want:  []int{0, 1},
		calls: []model.ToolCall{{Name: "kv_get", Arguments: `{"key":"a"}`}, {Name: "kv_get", Arguments: `{"key":"b"}`}},
	}, {
		name: "split arguments, then a second call",
		events: []string{
			callChunk(call(-1, "x", "kv_get", "")),
			callChunk(call(-1, "", "", `{"key"`)),
			callChunk(call(-1, "", "", `:"a"}`)),
			callChunk(call(-1, "y", "kv_put", `{}`)),
		},
		want:  []int{0, 0, 0, 1},
		calls: []model.ToolCall{{ID: "x", Name: "kv_get", Arguments: `{"key":"a"}`}, {ID: "y", Name: "kv_put", Arguments: `{}`}},
	}, {
		name: "id and name repeated in every delta",
		events: []string{
			callChunk(call(-1, "x", "kv_get", `{"key"`)),
			callChunk(call(-1, "x", "kv_get", `:"a"}`)),
		},
		want:  []int{0, 0},
		calls: []model.ToolCall{{ID: "x", Name: "kv_get", Arguments: `{"key":"a"}`}},
	}, {
		name: "two calls in one event",
		events: []string{
			callChunk(call(-1, "", "kv_get", `{}`), call(-1, "", "kv_put", `{}`)),
		},
		want:  []int{0, 1},
		calls: []model.ToolCall{{Name: "kv_get", Arguments: `{}`}, {Name: "kv_put", Arguments: `{}`}},
	}, {
		name: "after indexed calls",
		events: []string{
			callChunk(call(0, "", "kv_get", `{}`)),
			callChunk(call(-1, "", "kv_put", `{}`)),
		},
		want:  []int{0, 1},
		calls: []model.ToolCall{{Name: "kv_get", Arguments: `{}`}, {Name: "kv_put", Arguments: `{}`}},
	}, {
		// A new call's name comes after its id: the latest call has no
		// name yet, so the name continues it.
		name: "name after the id",
		events: []string{
			callChunk(call(-1, "x", "kv_get", `{}`)),
			callChunk(call(-1, "y", "", "")),
			callChunk(call(-1, "", "kv_put", `{}`)),
		},
		want:  []int{0, 1, 1},
		calls: []model.ToolCall{{ID: "x", Name: "kv_get", Arguments: `{}`}, {ID: "y", Name: "kv_put", Arguments: `{}`}},
	}, {
		// Back at index 0 after 1: a new call still goes past every index
		// seen.
		name: "after an index went back",
		events: []string{
			callChunk(call(0, "a", "kv_get", `{"key":`)),
			callChunk(call(1, "b", "kv_put", `{}`)),
			callChunk(call(0, "", "", `"a"}`)),
			callChunk(call(-1, "c", "ping", `{}`)),
		},
		want: []int{0, 1, 0, 2},
		calls: []model.ToolCall{
			{ID: "a", Name: "kv_get", Arguments: `{"key":"a"}`},
			{ID: "b", Name: "kv_put", Arguments: `{}`},
			{ID: "c", Name: "ping", Arguments: `{}`},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, serve(append(tc.events, finishChunk("tool_calls"))...))
			chunks := collect(t, newModel(t, f), ask("go"))
			assert.Equal(t, tc.want, indexes(chunks))
			a := assemble(chunks)
			require.Len(t, a.calls, len(tc.calls))
			for i, want := range tc.calls {
				assert.Equal(t, want, *a.calls[i])
			}
		})
	}
}

func TestArgumentsAsJSONValue(t *testing.T) {
	ev := deltaChunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": 0, "id": "c", "function": map[string]any{"name": "kv_get", "arguments": map[string]any{"key": "a"}},
	}}})
	a := assemble(collect(t, newModel(t, newFake(t, serve(ev, finishChunk("tool_calls")))), ask("go")))
	require.Len(t, a.calls, 1)
	assert.JSONEq(t, `{"key":"a"}`, a.calls[0].Arguments)
}

func TestStreamCutMidAnswer(t *testing.T) {
	// The handler returns without [DONE]: the body ends cleanly but early.
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeEvents(w, textChunk("The answer is"), textChunk(" forty"))
	})
	s, err := newModel(t, f).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	defer s.Close()
	chunks, err := recvAll(t, s)
	assert.Equal(t, "The answer is forty", assemble(chunks).text)
	e := modelError(t, err)
	assert.True(t, e.Retryable)
	assert.Contains(t, e.Msg, "cut")

	// Recv after an error returns the same error.
	_, again := s.Recv(t.Context())
	assert.Same(t, e, modelError(t, again))
}

func TestStreamCutConnection(t *testing.T) {
	// The connection drops in the middle of an event.
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		ev := "data: " + textChunk("partial") + "\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"an"
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(ev), ev)
		assert.NoError(t, buf.Flush())
	})
	s, err := newModel(t, f).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	defer s.Close()
	chunks, err := recvAll(t, s)
	assert.Equal(t, []model.Chunk{{Text: "partial"}}, chunks)
	e := modelError(t, err)
	assert.True(t, e.Retryable)
	assert.Contains(t, e.Msg, "cut")
}

func TestEndWithoutDoneAfterFinish(t *testing.T) {
	// A finish reason completes the answer; a missing [DONE] after it is
	// not a cut.
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeEvents(w, textChunk("done"), finishChunk("stop"))
	})
	a := assemble(collect(t, newModel(t, f), ask("?")))
	assert.Equal(t, "done", a.text)
	assert.Equal(t, model.FinishStop, a.finish)
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header map[string]string
		max    time.Duration
		want   time.Duration
	}{
		{name: "seconds", status: 429, header: map[string]string{"Retry-After": "7"}, want: 7 * time.Second},
		{name: "above the default cap", status: 429, header: map[string]string{"Retry-After": "3600"}, want: openai.DefaultMaxRetryAfter},
		{name: "above a configured cap", status: 503, header: map[string]string{"Retry-After": "45"}, max: 30 * time.Second, want: 30 * time.Second},
		{name: "huge", status: 429, header: map[string]string{"Retry-After": "99999999999999999999999"}, want: openai.DefaultMaxRetryAfter},
		{name: "milliseconds", status: 429, header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"}, want: 1500 * time.Millisecond},
		// 8.008 is not exact in binary: seconds as a float lost a nanosecond,
		// and the wait, counted in whole ms, came 1 ms short.
		{name: "milliseconds kept whole", status: 429, header: map[string]string{"Retry-After-Ms": "8008"}, want: 8008 * time.Millisecond},
		{name: "fractional milliseconds", status: 429, header: map[string]string{"Retry-After-Ms": "0.5"}, want: 500 * time.Microsecond},
		{name: "HTTP date is no hint", status: 429, header: map[string]string{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}},
		{name: "negative is no hint", status: 429, header: map[string]string{"Retry-After": "-5"}},
		{name: "none", status: 502},
		// 408 is retryable like 429 and 5xx.
		{name: "request timeout", status: 408, header: map[string]string{"Retry-After": "4"}, want: 4 * time.Second},
		// A zero retry-after-ms is a hint (retry now), not a missing one.
		{name: "zero milliseconds", status: 429, header: map[string]string{"Retry-After-Ms": "0", "Retry-After": "3"}, want: 0},
		// 1.5 ns: a wait the provider asked for is rounded up, never down.
		{name: "sub-nanosecond rounded up", status: 429, header: map[string]string{"Retry-After-Ms": "0.0000015"}, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-test","type":"requests","code":"rate_limit_exceeded"}}`)
			})
			m := newModel(t, f, func(c *openai.Config) { c.MaxRetryAfter = tc.max })
			_, err := m.Stream(t.Context(), ask("?"))
			e := modelError(t, err)
			assert.Equal(t, tc.status, e.Status)
			assert.True(t, e.Retryable)
			assert.True(t, model.IsRetryable(err))
			assert.Equal(t, tc.want, e.RetryAfter)
			assert.Equal(t, "Rate limit reached for gpt-test", e.Msg)
		})
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`)
			return
		}
		writeEvents(w, textChunk("ok"), finishChunk("stop"), "[DONE]")
	})
	m := newModel(t, f)

	_, err := m.Stream(t.Context(), ask("?"))
	e := modelError(t, err)
	assert.Equal(t, 500, e.Status)
	assert.True(t, e.Retryable)
	assert.Equal(t, "The server had an error while processing your request.", e.Msg)
	assert.Len(t, f.requests(), 1, "the model must not retry by itself")

	a := assemble(collect(t, m, ask("?")))
	assert.Equal(t, "ok", a.text)
	assert.Len(t, f.requests(), 2)
}

func TestPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		msg    string
	}{
		{400, `{"error":{"message":"Invalid schema for function 'kv_get'","type":"invalid_request_error"}}`, "Invalid schema for function 'kv_get'"},
		{404, `{"object":"error","message":"The model ` + "`nope`" + ` does not exist.","type":"NotFoundError","code":404}`, "The model `nope` does not exist."},
		{422, `{"detail":"field required"}`, "field required"},
		{401, `<html><body>401 Unauthorized</body></html>`, "Unauthorized"},
		{403, `{"error":"model not allowed"}`, "model not allowed"},
		{400, `{"errors":[{"code":5007,"message":"No such model"}],"success":false}`, "No such model"},
		// A FastAPI validation error: the detail is a list, quoted as JSON.
		{422, `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`, `[{"loc":["body","model"],"msg":"field required"}]`},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Retry-After", "5")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := newModel(t, f).Stream(t.Context(), ask("?"))
			e := modelError(t, err)
			assert.Equal(t, tc.status, e.Status)
			assert.False(t, e.Retryable)
			assert.False(t, model.IsRetryable(err))
			assert.Zero(t, e.RetryAfter)
			assert.Equal(t, tc.msg, e.Msg)
		})
	}
}

func TestLongErrorMessageTruncated(t *testing.T) {
	long := strings.Repeat("é", 1000)
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, js(map[string]any{"error": map[string]any{"message": long}}))
	})
	_, err := newModel(t, f).Stream(t.Context(), ask("?"))
	e := modelError(t, err)
	assert.LessOrEqual(t, len(e.Msg), 500+len("…"))
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(e.Msg, "…")))
}

func TestErrorMessageAtTheLimitKeptWhole(t *testing.T) {
	exact := strings.Repeat("x", 500)
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, js(map[string]any{"error": map[string]any{"message": exact}}))
	})
	_, err := newModel(t, f).Stream(t.Context(), ask("?"))
	assert.Equal(t, exact, modelError(t, err).Msg)
}

func TestErrorInsideStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       map[string]any
		status    int
		retryable bool
	}{
		{"numeric 502", map[string]any{"message": "Provider returned error", "code": 502}, 502, true},
		{"string 429", map[string]any{"message": "slow down", "code": "429"}, 429, true},
		{"server_error type", map[string]any{"message": "oops", "type": "server_error"}, 0, true},
		{"invalid request", map[string]any{"message": "context too long", "code": "context_length_exceeded", "type": "invalid_request_error"}, 0, false},
		{"400", map[string]any{"message": "bad", "code": 400}, 400, false},
		{"rate_limit_exceeded code", map[string]any{"message": "slow down", "code": "rate_limit_exceeded"}, 0, true},
		{"rate_limit_error type", map[string]any{"message": "slow down", "type": "rate_limit_error"}, 0, true},
		{"overloaded code", map[string]any{"message": "busy", "code": "overloaded"}, 0, true},
		// A code that is no HTTP status is not one.
		{"code out of range", map[string]any{"message": "odd", "code": 1001}, 0, false},
		// No message: a stand-in that names the code.
		{"no message", map[string]any{"code": "server_error"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, serve(textChunk("So"), js(map[string]any{"error": tc.err})))
			s, err := newModel(t, f).Stream(t.Context(), ask("?"))
			require.NoError(t, err)
			defer s.Close()
			chunks, err := recvAll(t, s)
			assert.Equal(t, []model.Chunk{{Text: "So"}}, chunks)
			e := modelError(t, err)
			assert.Equal(t, tc.retryable, e.Retryable)
			assert.Equal(t, tc.status, e.Status)
			if msg, ok := tc.err["message"]; ok {
				assert.Equal(t, msg, e.Msg)
			} else {
				assert.Equal(t, "the provider reported an error in the stream (code "+tc.err["code"].(string)+")", e.Msg)
			}
		})
	}
}

func TestUsageAccounting(t *testing.T) {
	// Usage alone in a last chunk with no choices (OpenAI), or beside the
	// finish reason (Ollama); "usage": null elsewhere is not usage.
	t.Run("separate chunk", func(t *testing.T) {
		f := newFake(t, serve(textChunk("a"), finishChunk("stop"), usageChunk(100, 7)))
		chunks := collect(t, newModel(t, f), ask("?"))
		var usages []model.Usage
		for _, c := range chunks {
			if c.Usage != nil {
				usages = append(usages, *c.Usage)
			}
		}
		assert.Equal(t, []model.Usage{{InputTokens: 100, OutputTokens: 7}}, usages)
	})
	t.Run("with the finish reason", func(t *testing.T) {
		ev := js(map[string]any{
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "b"}, "finish_reason": "length"}},
			"usage":   map[string]any{"prompt_tokens": 5, "completion_tokens": 9},
		})
		chunks := collect(t, newModel(t, newFake(t, serve(ev))), ask("?"))
		assert.Equal(t, []model.Chunk{{Text: "b"}, {Finish: model.FinishLength, Usage: &model.Usage{InputTokens: 5, OutputTokens: 9}}}, chunks)
	})
}

func TestSSEParsing(t *testing.T) {
	// Comments, other fields, CRLF, a data line without a space, data over
	// two lines, an event with empty data, and a last [DONE] padded with a
	// space and without a line ending.
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		io.WriteString(w, ": OPENROUTER PROCESSING\n\n")
		io.WriteString(w, "retry: 1000\n\n")
		io.WriteString(w, "event: message\r\nid: 1\r\ndata:"+textChunk("one")+"\r\n\r\n")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\n")
		io.WriteString(w, "data: \"delta\":{\"content\":\" two\"}}]}\n\n")
		io.WriteString(w, "data:\n\n")
		io.WriteString(w, "data: "+js(map[string]any{"choices": []any{
			map[string]any{"index": 1, "delta": map[string]any{"content": "other choice"}},
		}})+"\n\n")
		io.WriteString(w, "data: "+finishChunk("stop")+"\n\n")
		io.WriteString(w, "data: [DONE] ")
	})
	a := assemble(collect(t, newModel(t, f), ask("?")))
	assert.Equal(t, "one two", a.text)
	assert.Equal(t, model.FinishStop, a.finish)
}

func TestNonStreamedAnswer(t *testing.T) {
	// A server that ignores "stream": true answers with one completion,
	// whatever the case and parameters of its media type.
	for _, ct := range []string{"application/json", "Application/JSON ; charset=utf-8"} {
		t.Run(ct, func(t *testing.T) { testNonStreamedAnswer(t, ct) })
	}
}

func testNonStreamedAnswer(t *testing.T, contentType string) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", contentType)
		io.WriteString(w, js(map[string]any{
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": "Looking.",
				"tool_calls": []any{
					map[string]any{"id": "a", "type": "function", "function": map[string]any{"name": "kv_get", "arguments": `{"key":"x"}`}},
					map[string]any{"id": "a", "type": "function", "function": map[string]any{"name": "kv_get", "arguments": `{"key":"y"}`}},
				},
			}}},
			"usage": map[string]any{"prompt_tokens": 3, "completion_tokens": 4},
		}))
	})
	a := assemble(collect(t, newModel(t, f), ask("?")))
	assert.Equal(t, "Looking.", a.text)
	require.Len(t, a.calls, 2)
	assert.Equal(t, `{"key":"x"}`, a.calls[0].Arguments)
	assert.Equal(t, `{"key":"y"}`, a.calls[1].Arguments)
	assert.Equal(t, model.FinishToolCalls, a.finish)
	assert.Equal(t, &model.Usage{InputTokens: 3, OutputTokens: 4}, a.usage)
}

// stalled serves one chunk and then holds the stream open until the client
// goes away (or the test ends).
func stalled(t *testing.T) *fake {
	release := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		writeEvents(w, textChunk("thinking"))
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return f
}

// readSignal wraps a Doer so the test learns when a Recv is reading the
// body, with no sleeps.
type readSignal struct {
	client  openai.Doer
	reading chan struct{}
}

func (d *readSignal) Do(r *httpmsg.Request) (*httpmsg.Response, error) {
	resp, err := d.client.Do(r)
	if err == nil {
		resp.Body = &signalBody{ReadCloser: resp.Body, reading: d.reading}
	}
	return resp, err
}

type signalBody struct {
	io.ReadCloser
	reading chan struct{}
}

func (b *signalBody) Read(p []byte) (int, error) {
	select {
	case b.reading <- struct{}{}:
	default:
	}
	return b.ReadCloser.Read(p)
}

// blockedRecv streams from a stalled server, reads the first chunk and
// starts a second Recv with recvCtx, returning once it is reading.
func blockedRecv(t *testing.T, streamCtx, recvCtx context.Context) (model.Stream, <-chan error) {
	t.Helper()
	f := stalled(t)
	sig := &readSignal{client: nethttp.Client(f.srv.Client()), reading: make(chan struct{}, 1)}
	m := newModel(t, f, func(c *openai.Config) { c.Client = sig })
	s, err := m.Stream(streamCtx, ask("?"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	c, err := s.Recv(t.Context())
	require.NoError(t, err)
	require.Equal(t, "thinking", c.Text)
	select {
	case <-sig.reading:
	default:
	}
	errs := make(chan error, 1)
	go func() {
		_, err := s.Recv(recvCtx)
		errs <- err
	}()
	select {
	case <-sig.reading:
	case <-t.Context().Done():
	}
	return s, errs
}

func waitErr(t *testing.T, errs <-chan error) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Recv did not return")
		return nil
	}
}

func TestStalledStreamRecvContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, errs := blockedRecv(t, t.Context(), ctx)
	cancel() // the runner's watchdog
	err := waitErr(t, errs)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, model.IsRetryable(err), "the caller ended it: no provider failure")
	_, err = s.Recv(t.Context())
	assert.ErrorIs(t, err, context.Canceled, "an error is final")
}

func TestStalledStreamStreamContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	_, errs := blockedRecv(t, ctx, t.Context())
	cancel()
	err := waitErr(t, errs)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, model.IsRetryable(err), "the caller ended it: no provider failure")
}

func TestCloseUnblocksRecv(t *testing.T) {
	s, errs := blockedRecv(t, t.Context(), t.Context())
	require.NoError(t, s.Close())
	err := waitErr(t, errs)
	require.Error(t, err)
	assert.NotErrorIs(t, err, io.EOF)
	assert.Contains(t, err.Error(), "closed")
	assert.False(t, model.IsRetryable(err), "the caller closed it: no provider failure")
	_, err = s.Recv(t.Context())
	assert.Error(t, err)
}

func TestRecvWithEndedContext(t *testing.T) {
	f := newFake(t, serve(textChunk("a")))
	s, err := newModel(t, f).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.Recv(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestRequestBody(t *testing.T) {
	f := newFake(t, serve(finishChunk("stop")))
	m := newModel(t, f)
	schema := json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)
	collect(t, m, model.Request{
		Model:  "override-model",
		System: "You are terse.",
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "what is a?"},
			{Role: model.RoleAssistant, Text: "Checking.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "kv_get", Arguments: `{"key":"a"}`}}},
			{Role: model.RoleTool, ToolCallID: "c1", Name: "kv_get", Text: "42"},
			{Role: model.RoleUser, Text: "The previous run was interrupted.", Notice: true},
			// A notice is a user message whatever its role.
			{Text: "Resuming.", Notice: true},
			// Blank arguments are no arguments.
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c2", Name: "ping"}, {ID: "c3", Name: "ping", Arguments: " \n"}}},
			{Role: model.RoleTool, ToolCallID: "c2", Name: "ping", Text: "pong"},
			{Role: model.RoleTool, ToolCallID: "c3", Name: "ping", Text: "pong"},
			// Content is null only beside tool calls: an empty answer is "".
			{Role: model.RoleAssistant},
			{Role: model.RoleAssistant, Text: "a is 42."},
		},
		Tools: []model.ToolSpec{
			{Name: "kv_get", Description: "Read a key.", Schema: schema},
			{Name: "ping"},
			{Name: "noop", Schema: json.RawMessage(" \n")}, // a blank schema is no schema
		},
	})
	collect(t, m, ask("no tools"))

	reqs := f.requests()
	require.Len(t, reqs, 2)
	assert.JSONEq(t, `{
		"model": "override-model",
		"stream": true,
		"stream_options": {"include_usage": true},
		"messages": [
			{"role": "system", "content": "You are terse."},
			{"role": "user", "content": "what is a?"},
			{"role": "assistant", "content": "Checking.", "tool_calls": [
				{"id": "c1", "type": "function", "function": {"name": "kv_get", "arguments": "{\"key\":\"a\"}"}}]},
			{"role": "tool", "tool_call_id": "c1", "content": "42"},
			{"role": "user", "content": "The previous run was interrupted."},
			{"role": "user", "content": "Resuming."},
			{"role": "assistant", "content": null, "tool_calls": [
				{"id": "c2", "type": "function", "function": {"name": "ping", "arguments": "{}"}},
				{"id": "c3", "type": "function", "function": {"name": "ping", "arguments": "{}"}}]},
			{"role": "tool", "tool_call_id": "c2", "content": "pong"},
			{"role": "tool", "tool_call_id": "c3", "content": "pong"},
			{"role": "assistant", "content": ""},
			{"role": "assistant", "content": "a is 42."}
		],
		"tools": [
			{"type": "function", "function": {"name": "kv_get", "description": "Read a key.",
				"parameters": {"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}}},
			{"type": "function", "function": {"name": "ping", "parameters": {"type":"object","properties":{}}}},
			{"type": "function", "function": {"name": "noop", "parameters": {"type":"object","properties":{}}}}
		]
	}`, string(reqs[0].body))
	assert.JSONEq(t, `{
		"model": "gpt-test",
		"stream": true,
		"stream_options": {"include_usage": true},
		"messages": [{"role": "user", "content": "no tools"}]
	}`, string(reqs[1].body))
}

func TestUnknownRole(t *testing.T) {
	f := newFake(t, serve())
	_, err := newModel(t, f).Stream(t.Context(), model.Request{Messages: []model.Message{{Role: "wizard", Text: "?"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"wizard"`)
	assert.Empty(t, f.requests())
}

func TestHeaders(t *testing.T) {
	f := newFake(t, serve(finishChunk("stop")))
	collect(t, newModel(t, f, func(c *openai.Config) {
		c.BaseURL += "/" // a trailing slash is fine
		c.Headers = map[string]string{"HTTP-Referer": "https://example.test", "X-Title": "revenant"}
	}), ask("?"))
	collect(t, newModel(t, f, func(c *openai.Config) { c.APIKey = "" }), ask("?"))

	reqs := f.requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		assert.Equal(t, http.MethodPost, r.method)
		assert.Equal(t, "/v1/chat/completions", r.path)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		assert.Equal(t, "text/event-stream", r.header.Get("Accept"))
	}
	assert.Equal(t, "Bearer "+testKey, reqs[0].header.Get("Authorization"))
	assert.Equal(t, "https://example.test", reqs[0].header.Get("HTTP-Referer"))
	assert.Equal(t, "revenant", reqs[0].header.Get("X-Title"))
	assert.Empty(t, reqs[1].header.Values("Authorization"), "no key, no Authorization header")
	for _, r := range reqs {
		assert.Equal(t, []string{"revenant"}, r.header.Values("User-Agent"), "revenant names itself, not Go's client")
	}
}

// An operator's configured User-Agent replaces revenant's own.
func TestConfiguredUserAgent(t *testing.T) {
	f := newFake(t, serve(finishChunk("stop")))
	collect(t, newModel(t, f, func(c *openai.Config) {
		c.Headers = map[string]string{"User-Agent": "acme-agents/2"}
	}), ask("?"))
	reqs := f.requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, []string{"acme-agents/2"}, reqs[0].header.Values("User-Agent"))
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  openai.Config
		want string
	}{
		{"empty base URL", openai.Config{Model: "m"}, "base URL"},
		{"no client", openai.Config{BaseURL: "https://example.com/v1", Model: "m"}, "no client configured"},
		{"no scheme", openai.Config{BaseURL: "api.openai.com/v1", Model: "m"}, "absolute http or https"},
		{"relative", openai.Config{BaseURL: "/v1", Model: "m"}, "absolute http or https"},
		{"other scheme", openai.Config{BaseURL: "ftp://example.com/v1", Model: "m"}, "absolute http or https"},
		{"no host", openai.Config{BaseURL: "http:///v1", Model: "m"}, "no host"},
		{"unparsable", openai.Config{BaseURL: "http://[::1", Model: "m"}, "parse base URL"},
		{"query", openai.Config{BaseURL: "https://example.com/v1?x=1", Model: "m"}, "query"},
		{"no model", openai.Config{BaseURL: "https://example.com/v1"}, "model"},
		{"negative cap", openai.Config{BaseURL: "https://example.com/v1", Model: "m", MaxRetryAfter: -time.Second}, "negative"},
		{"bad header name", openai.Config{BaseURL: "https://example.com/v1", Model: "m", Headers: map[string]string{"X Title": "a"}}, "header name"},
		{"bad header value", openai.Config{BaseURL: "https://example.com/v1", Model: "m", Headers: map[string]string{"X-Title": "a\r\nb"}}, "line break"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := openai.New(tc.cfg)
			assert.Nil(t, m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "openai: "), err.Error())
		})
	}
}

// TestRedirectNotFollowed: a Doer does one round trip, so a provider's
// redirect is an answer: a permanent error, and nothing is sent to where it
// points (the key stays with the configured endpoint).
func TestRedirectNotFollowed(t *testing.T) {
	elsewhere := newFake(t, serve(textChunk("hi")))
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, elsewhere.srv.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
	})
	_, err := newModel(t, f).Stream(t.Context(), ask("?"))
	e := modelError(t, err)
	assert.Equal(t, http.StatusTemporaryRedirect, e.Status)
	assert.False(t, e.Retryable)
	assert.Len(t, f.requests(), 1)
	assert.Empty(t, elsewhere.requests())
}

func TestTransportErrors(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		m, err := openai.New(openai.Config{BaseURL: url, APIKey: testKey, Model: "m", Client: nethttp.Client(nil)})
		require.NoError(t, err)
		_, err = m.Stream(t.Context(), ask("?"))
		e := modelError(t, err)
		assert.True(t, e.Retryable)
		assert.Zero(t, e.Status)
		// What the session's events show names neither the provider's
		// URL nor its address; the cause, for the log, does.
		host := strings.TrimPrefix(url, "http://")
		assert.Equal(t, "send request: the provider could not be reached", e.Msg)
		assert.NotContains(t, e.Error(), host)
		assert.Contains(t, e.Err.Error(), host)
	})
	t.Run("context ended before", func(t *testing.T) {
		m, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1", Model: "m", Client: doerFunc(func(*httpmsg.Request) (*httpmsg.Response, error) {
			t.Error("no request may be sent")
			return nil, errors.New("unreachable")
		})})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = m.Stream(ctx, ask("?"))
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("context ended during", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		m, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1", Model: "m", Client: doerFunc(func(r *httpmsg.Request) (*httpmsg.Response, error) {
			cancel()
			return nil, fmt.Errorf("dial: %w", r.Context().Err())
		})})
		require.NoError(t, err)
		_, err = m.Stream(ctx, ask("?"))
		assert.ErrorIs(t, err, context.Canceled)
		assert.False(t, model.IsRetryable(err))
	})
}

type doerFunc = httpmsg.DoerFunc

// TestHeaderSecretsNeverLeak: a library user who authenticates with a
// header of Config.Headers instead of the key (no APIKey) is redacted as
// the key is, the whole value and the credential after its scheme, when
// the provider quotes either back; short values are left alone.
func TestHeaderSecretsNeverLeak(t *testing.T) {
	const token = "hdr-token-0123456789-SECRET"
	const other = "x-other-secret-value"
	const pin = "pin-8byt" // the shortest value redacted: 8 bytes
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusUnauthorized)
		msg := "bad credential " + token + " in " + r.Header.Get("Authorization") + "; also " + r.Header.Get("X-Other") + ", " + r.Header.Get("X-Pin") + " (" + r.Header.Get("X-Lang") + ")"
		io.WriteString(w, js(map[string]any{"error": map[string]any{"message": msg}}))
	})
	m := newModel(t, f, func(c *openai.Config) {
		c.APIKey = ""
		c.Headers = map[string]string{"Authorization": "Bearer " + token, "X-Other": other, "X-Pin": pin, "X-Lang": "en"}
	})
	_, err := m.Stream(t.Context(), ask("?"))
	require.Error(t, err)
	for _, s := range []string{err.Error(), fmt.Sprintf("%#v", err)} {
		assert.NotContains(t, s, token)
		assert.NotContains(t, s, other)
		assert.NotContains(t, s, pin)
	}
	assert.Contains(t, err.Error(), "bad credential [redacted] in [redacted]; also [redacted], [redacted] (en)")
}

func TestAPIKeyNeverLeaks(t *testing.T) {
	echo := "Incorrect API key provided: " + testKey + "."
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		switch n {
		case 0:
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, js(map[string]any{"error": map[string]any{"message": echo}}))
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, js(map[string]any{"error": map[string]any{"message": echo}}))
		case 2:
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "upstream said "+testKey)
		case 3:
			writeEvents(w, js(map[string]any{"error": map[string]any{"message": echo, "code": 500}}))
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, js(map[string]any{"error": map[string]any{"message": echo}}))
		}
	})
	m := newModel(t, f)
	var errs []error
	for range 5 {
		s, err := m.Stream(t.Context(), ask("?"))
		if err == nil {
			_, err = recvAll(t, s)
			s.Close()
		}
		require.Error(t, err)
		errs = append(errs, err)
	}
	// A transport error that quotes the request's header.
	leaky, err := openai.New(openai.Config{BaseURL: f.srv.URL, APIKey: testKey, Model: "m", Client: doerFunc(func(r *httpmsg.Request) (*httpmsg.Response, error) {
		return nil, errors.New("proxy refused " + r.Header.Get("Authorization"))
	})})
	require.NoError(t, err)
	_, err = leaky.Stream(t.Context(), ask("?"))
	require.Error(t, err)
	errs = append(errs, err)

	for i, err := range errs {
		assert.NotContains(t, err.Error(), testKey, "error %d", i)
		assert.NotContains(t, fmt.Sprintf("%#v", err), testKey, "error %d", i)
	}
	assert.Contains(t, errs[0].Error(), "Incorrect API key provided: [redacted].")

	// Printing or logging the configuration or the model hides the key.
	cfg := openai.Config{BaseURL: f.srv.URL, APIKey: testKey, Model: "m", Headers: map[string]string{"X-Api-Key": testKey}}
	var logged bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logged, nil))
	logger.Info("config", "cfg", cfg, "model", m)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", cfg, "model", m)
	out := fmt.Sprintf("%v %+v %#v %s %q %d %x", cfg, cfg, cfg, cfg, cfg, cfg, cfg) +
		fmt.Sprintf("%v %+v %#v %s", m, m, m, *m) + cfg.String() + m.String() + logged.String()
	assert.NotContains(t, out, testKey)
	assert.Contains(t, out, "[redacted]")
	sc := bufio.NewScanner(&logged)
	for sc.Scan() {
		assert.NotContains(t, sc.Text(), testKey)
	}
}

// failingBody yields data, then fails with err (an egress the host ended).
type failingBody struct {
	data []byte
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *failingBody) Close() error { return nil }

// A transport failure keeps its cause for errors.Is, whether the request,
// the stream or a non-streamed answer failed: a host's fenced egress
// (core.ErrFenced underneath) must not become mere text. The text stays
// redacted, and so does that of the cause model.Error unwraps to.
func TestTransportErrorsKeepTheirCause(t *testing.T) {
	fenced := errors.New("fenced by " + testKey)
	respond := func(contentType, body string) func(*httpmsg.Request) (*httpmsg.Response, error) {
		return func(r *httpmsg.Request) (*httpmsg.Response, error) {
			return &httpmsg.Response{StatusCode: http.StatusOK, Header: httpmsg.Header{"Content-Type": {contentType}},
				Body: &failingBody{data: []byte(body), err: fmt.Errorf("egress ended: %w", fenced)}, Request: r}, nil
		}
	}
	for _, tc := range []struct {
		name string
		do   func(*httpmsg.Request) (*httpmsg.Response, error)
	}{
		{"request", func(*httpmsg.Request) (*httpmsg.Response, error) { return nil, fmt.Errorf("egress: %w", fenced) }},
		{"stream", respond("text/event-stream", "data: "+js(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "hi"}}}})+"\n\n")},
		{"answer", respond("application/json", `{"choices": [`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1", APIKey: testKey, Model: "m", Client: doerFunc(tc.do)})
			require.NoError(t, err)
			s, err := m.Stream(t.Context(), ask("?"))
			if err == nil {
				_, err = recvAll(t, s)
				s.Close()
			}
			require.ErrorIs(t, err, fenced)
			assert.True(t, model.IsRetryable(err), "a transport failure is retryable")
			assert.NotContains(t, err.Error(), testKey)
			cause := errors.Unwrap(err)
			require.NotNil(t, cause)
			assert.NotContains(t, cause.Error(), testKey, "the cause model.Error hands out is redacted")
		})
	}
}
