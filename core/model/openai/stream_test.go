package openai_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/openai"
)

// answering is a model whose client answers every request with status,
// contentType and body, without a server.
func answering(t *testing.T, status int, contentType string, body io.ReadCloser) *openai.Model {
	t.Helper()
	m, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1", APIKey: testKey, Model: "m", Client: doerFunc(func(r *httpmsg.Request) (*httpmsg.Response, error) {
		return &httpmsg.Response{StatusCode: status, Header: httpmsg.Header{"Content-Type": {contentType}}, Body: body, Request: r}, nil
	})})
	require.NoError(t, err)
	return m
}

// trackedBody is a response body that records whether it was closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return nil
}

func events(evs ...string) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

// Every response body is closed once the model is done with it, so the
// connection under it is released: an error answer, a non-streamed answer,
// and a stream that failed (before the caller's Close).
func TestResponseBodiesAreClosed(t *testing.T) {
	t.Run("error answer", func(t *testing.T) {
		body := &trackedBody{Reader: strings.NewReader(`{"error":{"message":"bad"}}`)}
		_, err := answering(t, http.StatusBadRequest, "application/json", body).Stream(t.Context(), ask("?"))
		require.Error(t, err)
		assert.True(t, body.closed.Load())
	})
	t.Run("non-streamed answer", func(t *testing.T) {
		body := &trackedBody{Reader: strings.NewReader(js(map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"content": "hi"}}}}))}
		s, err := answering(t, http.StatusOK, "application/json", body).Stream(t.Context(), ask("?"))
		require.NoError(t, err)
		_, err = recvAll(t, s)
		require.ErrorIs(t, err, io.EOF)
		require.NoError(t, s.Close())
		assert.True(t, body.closed.Load())
	})
	t.Run("failed stream", func(t *testing.T) {
		body := &trackedBody{Reader: strings.NewReader(events(textChunk("So"), js(map[string]any{"error": map[string]any{"message": "bad", "code": 400}})))}
		s, err := answering(t, http.StatusOK, "text/event-stream", body).Stream(t.Context(), ask("?"))
		require.NoError(t, err)
		_, err = recvAll(t, s)
		require.Error(t, err)
		assert.True(t, body.closed.Load(), "closed by the failure, before the caller's Close")
		s.Close()
	})
}

// A non-streamed answer is buffered whole; Close and an ended context
// still stop Recv from handing out what is left of it.
func TestBufferedChunksStopAtCloseAndContextEnd(t *testing.T) {
	completion := func(t *testing.T) model.Stream {
		body := io.NopCloser(strings.NewReader(js(map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"content": "hi"}}}})))
		s, err := answering(t, http.StatusOK, "application/json", body).Stream(t.Context(), ask("?"))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Run("closed", func(t *testing.T) {
		s := completion(t)
		require.NoError(t, s.Close())
		_, err := s.Recv(t.Context())
		require.Error(t, err)
		assert.NotErrorIs(t, err, io.EOF)
		assert.Contains(t, err.Error(), "closed")
	})
	t.Run("context ended", func(t *testing.T) {
		s := completion(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := s.Recv(ctx)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// cancelingBody ends a context when it is read, then yields its data: the
// context ends while Recv reads, and the read succeeds anyway.
type cancelingBody struct {
	io.Reader
	cancel context.CancelFunc
}

func (b *cancelingBody) Read(p []byte) (int, error) {
	b.cancel()
	return b.Reader.Read(p)
}

func (b *cancelingBody) Close() error { return nil }

func TestContextEndedDuringASuccessfulReadWins(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	body := &cancelingBody{Reader: strings.NewReader(events(textChunk("late"))), cancel: cancel}
	s, err := answering(t, http.StatusOK, "text/event-stream", body).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	defer s.Close()
	c, err := s.Recv(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, c)
}

func TestBodyCutAfterFinishReason(t *testing.T) {
	// A connection that drops mid-chunk after the finish reason lost at
	// most the usage: the answer is complete. Before it, it is a cut.
	for _, tc := range []struct {
		name   string
		events []string
		cut    bool
	}{
		{"after the finish", []string{textChunk("done"), finishChunk("stop")}, false},
		{"before the finish", []string{textChunk("do")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &failingBody{data: []byte(events(tc.events...)), err: io.ErrUnexpectedEOF}
			s, err := answering(t, http.StatusOK, "text/event-stream", body).Stream(t.Context(), ask("?"))
			require.NoError(t, err)
			defer s.Close()
			_, err = recvAll(t, s)
			if tc.cut {
				assert.True(t, model.IsRetryable(err), "%v", err)
			} else {
				assert.ErrorIs(t, err, io.EOF)
			}
		})
	}
}

func TestEmptyFinishReasonDoesNotFinish(t *testing.T) {
	// Some servers send "finish_reason": "" mid-answer: it is no finish, so
	// a body ending after it is still a cut.
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeEvents(w, textChunk("The answer is"), finishChunk(""))
	})
	s, err := newModel(t, f).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	defer s.Close()
	chunks, err := recvAll(t, s)
	assert.Equal(t, []model.Chunk{{Text: "The answer is"}}, chunks)
	assert.True(t, modelError(t, err).Retryable)
}

func TestLastEventWithoutBlankLine(t *testing.T) {
	// The body ends right after a complete event, with no blank line and no
	// [DONE]: the event counts.
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+textChunk("ok")+"\n\ndata: "+finishChunk("stop"))
	})
	a := assemble(collect(t, newModel(t, f), ask("?")))
	assert.Equal(t, "ok", a.text)
	assert.Equal(t, model.FinishStop, a.finish)
}

func TestOversizedEventIsPermanent(t *testing.T) {
	// Over the 8 MiB cap on one event: retrying would get the same answer.
	huge := "data: " + strings.Repeat("x", 9<<20) + "\n\n"
	s, err := answering(t, http.StatusOK, "text/event-stream", io.NopCloser(strings.NewReader(huge))).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	defer s.Close()
	_, err = recvAll(t, s)
	e := modelError(t, err)
	assert.False(t, e.Retryable)
	assert.Contains(t, e.Msg, "exceeds")
}

func TestContentAsParts(t *testing.T) {
	// Content as an array of parts: text parts (typed or not) are joined,
	// others skipped.
	ev := deltaChunk(map[string]any{"content": []any{
		map[string]any{"text": "a"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.test/x.png"}},
		map[string]any{"type": "text", "text": "b"},
	}})
	a := assemble(collect(t, newModel(t, newFake(t, serve(ev, finishChunk("stop")))), ask("?")))
	assert.Equal(t, "ab", a.text)
}

func TestNullArgumentsAreNone(t *testing.T) {
	first := deltaChunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": 0, "id": "c", "function": map[string]any{"name": "kv_get", "arguments": nil},
	}}})
	a := assemble(collect(t, newModel(t, newFake(t, serve(first, callChunk(call(0, "", "", `{"key":"a"}`)), finishChunk("tool_calls")))), ask("?")))
	require.Len(t, a.calls, 1)
	assert.Equal(t, `{"key":"a"}`, a.calls[0].Arguments)
}

func TestNullErrorMemberIsNoError(t *testing.T) {
	ev := js(map[string]any{"error": nil, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "hi"}, "finish_reason": "stop"}}})
	a := assemble(collect(t, newModel(t, newFake(t, serve(ev))), ask("?")))
	assert.Equal(t, "hi", a.text)
	assert.Equal(t, model.FinishStop, a.finish)
}

func TestNonStreamedAnswerWithoutFinishReason(t *testing.T) {
	// A whole answer is complete even when it names no finish reason.
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, js(map[string]any{"choices": []any{map[string]any{"index": 0, "message": map[string]any{"content": "hi"}}}}))
	})
	assert.Equal(t, "hi", assemble(collect(t, newModel(t, f), ask("?"))).text)
}

func TestAnswerThatIsNoStreamIsPermanent(t *testing.T) {
	// A base URL that points at a website answers 200 with a page: asking
	// again gets the same page, so it is a permanent error naming the type,
	// not a cut stream retried until the retry window closes. A stream that
	// declares no type, or the event-stream type, and carries no event is
	// still a cut.
	for _, tc := range []struct {
		contentType string
		body        string
		retryable   bool
	}{
		{"text/html; charset=utf-8", "<html><body>Welcome</body></html>", false},
		{"text/plain", "service is up\n", false},
		{"text/event-stream", ": keep-alive\n\n", true},
		{"", "", true},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			s, err := answering(t, http.StatusOK, tc.contentType, io.NopCloser(strings.NewReader(tc.body))).Stream(t.Context(), ask("?"))
			require.NoError(t, err)
			defer s.Close()
			_, err = recvAll(t, s)
			e := modelError(t, err)
			assert.Equal(t, tc.retryable, e.Retryable, "%v", err)
			if !tc.retryable {
				assert.Contains(t, e.Msg, tc.contentType[:strings.IndexAny(tc.contentType+";", ";")])
			}
		})
	}
}

func TestStreamOfAnotherDeclaredTypeIsStillRead(t *testing.T) {
	// Some proxies relabel a stream (text/plain): its events are read as
	// usual, and a cut after the first event is still a retryable cut.
	body := events(textChunk("hi"), finishChunk("stop"), "[DONE]")
	s, err := answering(t, http.StatusOK, "text/plain", io.NopCloser(strings.NewReader(body))).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	chunks, err := recvAll(t, s)
	s.Close()
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, "hi", chunks[0].Text)

	s, err = answering(t, http.StatusOK, "text/plain", io.NopCloser(strings.NewReader(events(textChunk("hi"))))).Stream(t.Context(), ask("?"))
	require.NoError(t, err)
	defer s.Close()
	_, err = recvAll(t, s)
	assert.True(t, modelError(t, err).Retryable, "%v", err)
}

// An answer with no choice at all (no text, no tool call, not even a
// finish reason) is a model error, not an empty reply: streamed, as one
// completion, or [DONE] alone. The same request would get the same, so
// it is not retried. A choiceless event before the answer's own (a
// filter's notice, usage) is no such answer.
func TestAnswerWithNoChoiceIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
	}{
		{"streamed", "text/event-stream", "data: {\"choices\":[]}\n\ndata: " + usageChunk(3, 0) + "\n\ndata: [DONE]\n\n"},
		{"done alone", "text/event-stream", "data: [DONE]\n\n"},
		{"one completion", "application/json", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := answering(t, http.StatusOK, tc.contentType, io.NopCloser(strings.NewReader(tc.body))).Stream(t.Context(), ask("?"))
			require.NoError(t, err)
			defer s.Close()
			_, err = recvAll(t, s)
			e := modelError(t, err)
			assert.False(t, e.Retryable)
			assert.Contains(t, e.Msg, "no choice")
		})
	}
	f := newFake(t, serve(`{"choices":[],"prompt_filter_results":[]}`, textChunk("fine"), finishChunk("stop")))
	a := assemble(collect(t, newModel(t, f), ask("?")))
	assert.Equal(t, "fine", a.text)
}
