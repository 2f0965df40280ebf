package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// Errors are answered by code: the sentinel or coded type decides the
// type and status, and the message is the one written for the client,
// however deeply a host wrapped it.
func TestErrorOfMapsByCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		typ  api.ErrorType
		msg  string
	}{
		{"core refusal wrapped twice", fmt.Errorf("serve: %w", fmt.Errorf("tree x: %w", &core.Error{Code: core.ErrInvalid, Msg: "admit prompt: empty text"})), api.ErrInvalidRequest, "admit prompt: empty text"},
		{"core conflict", fmt.Errorf("admit: %w", &core.Error{Code: core.ErrConflict, Msg: `prompt id "p" was already used with a different body`}), api.ErrConflict, `prompt id "p" was already used with a different body`},
		{"tree exists", fmt.Errorf("create tree x: %w", api.ErrTreeExists), api.ErrConflict, "tree already exists"},
		{"not found", fmt.Errorf("session x: %w", core.ErrNotFound), api.ErrNotFound, "no such session"},
		{"tree not found", fmt.Errorf("get tree x: %w", api.ErrTreeNotFound), api.ErrNotFound, "no such session"},
		{"read-only before closed", errors.Join(core.ErrReadOnly, core.ErrClosed), api.ErrReadOnly, "the session is read-only: its storage is full or failing, so it cannot save anything; reading it still works"},
		{"api error as it is", fmt.Errorf("x: %w", &api.Error{Type: api.ErrPayloadTooLarge, Message: "too big"}), api.ErrPayloadTooLarge, "too big"},
		{"transient storage failure", fmt.Errorf("read: %w", &storage.Error{Code: storage.CodeBusy}), api.ErrUnavailable,
			"the session's storage is temporarily unavailable (full, busy or failing); try again"},
		{"unknown is internal", errors.New("disk on fire"), api.ErrInternal, "internal error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := api.ErrorOf(c.err)
			assert.Equal(t, c.typ, e.Type)
			assert.Equal(t, c.msg, e.Message)
			assert.Equal(t, api.Statuses[c.typ], api.StatusOf(c.err))
		})
	}
	assert.True(t, api.Internal(errors.New("disk on fire")), "an unknown error's detail is the server's to log")
	assert.False(t, api.Internal(&api.Error{Type: api.ErrInternal, Message: "internal error"}), "raised by the API itself")
}

// An ErrorType is a sentinel: errors.Is finds an *Error or a
// *DecodeError of that type through any wrapping.
func TestErrorTypeIsSentinel(t *testing.T) {
	err := fmt.Errorf("create: %w", &api.Error{Type: api.ErrUnauthorized, Message: "no"})
	assert.ErrorIs(t, err, api.ErrUnauthorized)
	assert.NotErrorIs(t, err, api.ErrNotFound)
	_, err = api.DecodePrompt([]byte(`{"text":"a","TEXT":"b"}`))
	assert.ErrorIs(t, err, api.ErrInvalidRequest)
}

// The strict decoder reports its problems by kind and member, not only
// in words; the kind decides the answer's type.
func TestDecodeErrorKinds(t *testing.T) {
	cases := []struct {
		body    string
		problem api.DecodeProblem
		field   string
		typ     api.ErrorType
	}{
		{``, api.ProblemEmpty, "", api.ErrInvalidJSON},
		{`{not json`, api.ProblemSyntax, "", api.ErrInvalidJSON},
		{"\xff", api.ProblemSyntax, "", api.ErrInvalidJSON},
		{`null`, api.ProblemNotObject, "", api.ErrInvalidJSON},
		{`{"text":"a","text":"b"}`, api.ProblemDuplicate, "text", api.ErrInvalidJSON},
		{`{"text":"a","Mode":"queue"}`, api.ProblemUnknownField, "Mode", api.ErrInvalidRequest},
		{`{"text":1}`, api.ProblemWrongType, "text", api.ErrInvalidRequest},
		{`{"text":"a"} {}`, api.ProblemTrailingData, "", api.ErrInvalidJSON},
	}
	for _, c := range cases {
		_, err := api.DecodePrompt([]byte(c.body))
		var de *api.DecodeError
		require.ErrorAs(t, err, &de, "%q", c.body)
		assert.Equal(t, c.problem, de.Problem, "%q", c.body)
		assert.Equal(t, c.field, de.Field, "%q", c.body)
		assert.Equal(t, c.typ, api.ErrorOf(err).Type, "%q", c.body)
	}
	_, err := api.DecodeCreate([]byte(`{"config":{"model":"a","model":"b"}}`))
	var de *api.DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "config.model", de.Field)
}

// A body that is not JSON at all (a form, plain text) is told so, not
// given the decoder's words about a literal it misread.
func TestDecodeSaysAFormIsNotJSON(t *testing.T) {
	for _, body := range []string{"text=hello", "hello there", "  text=" + strings.Repeat("a", 100)} {
		_, err := api.DecodePrompt([]byte(body))
		var de *api.DecodeError
		require.ErrorAs(t, err, &de, "%q", body)
		assert.Equal(t, api.ProblemSyntax, de.Problem)
		assert.Equal(t, api.ErrInvalidJSON, api.ErrorOf(err).Type)
		assert.Contains(t, err.Error(), "must be a JSON object, starting with {", "%q", body)
		assert.Less(t, len(err.Error()), 100, "the body is quoted only in part")
	}
	_, err := api.DecodePrompt([]byte(`{"text":`))
	assert.Contains(t, err.Error(), "is not a JSON object: unexpected EOF", "an object cut short keeps the decoder's words")
}

// A number too large for a float64 (1e999) is well-formed JSON: where a
// string is expected it is a member of the wrong type (invalid_request),
// as any other number there is, never "not valid JSON".
func TestDecodeHugeNumberIsWrongType(t *testing.T) {
	for _, body := range []string{`{"text":"a","id":1e999}`, `{"text":-1e999}`, `{"text":"a","mode":123456789e400}`} {
		_, err := api.DecodePrompt([]byte(body))
		var de *api.DecodeError
		require.ErrorAs(t, err, &de, body)
		assert.Equal(t, api.ProblemWrongType, de.Problem, "%s: %v", body, err)
		assert.Equal(t, api.ErrInvalidRequest, api.ErrorOf(err).Type, body)
	}
	for _, body := range []string{`{"config":{"tools":[1e400]}}`, `{"config":{"model":1e999}}`, `{"config":{"permissions":[{"action":1e999}]}}`} {
		_, err := api.DecodeCreate([]byte(body))
		assert.Equal(t, api.ErrInvalidRequest, api.ErrorOf(err).Type, "%s: %v", body, err)
	}
	_, err := api.DecodeReply([]byte(`{"answers":[1e999],"response_id":"r"}`), "question")
	assert.NoError(t, err, "answers are checked against the question, later")
	_, err = api.DecodeReply([]byte(`{"reply":"once","response_id":1e999}`), "permission")
	assert.Equal(t, api.ErrInvalidRequest, api.ErrorOf(err).Type, "%v", err)
}

// WriteError is the one writer of error answers, for hosts too.
func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	api.WriteError(nethttp.Writer(w), fmt.Errorf("auth: %w", &api.Error{Type: api.ErrUnauthorized, Message: "a bearer token is required"}))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Equal(t, "Bearer", w.Header().Get("WWW-Authenticate"))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, `{"error":{"type":"unauthorized","message":"a bearer token is required"}}`+"\n", w.Body.String())
	assert.Empty(t, w.Header().Get("Retry-After"))

	w = httptest.NewRecorder()
	api.WriteError(nethttp.Writer(w), fmt.Errorf("open: %w", &api.Error{Type: api.ErrUnavailable, Message: "busy", RetryAfter: 1500 * time.Millisecond}))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "2", w.Header().Get("Retry-After"), "whole seconds, rounded up")

	// A full queue clears when a turn ends: the client is told when to try again.
	w = httptest.NewRecorder()
	api.WriteError(nethttp.Writer(w), fmt.Errorf("admit: %w", &core.Error{Code: core.ErrQueueFull, Msg: "full"}))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
}

// A request whose context ended before it was served (its client went
// away, the server is stopping) is not the server's failure: 503, and not
// internal, so it is not logged as an error.
func TestCancelledRequestIsNotInternal(t *testing.T) {
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		err := fmt.Errorf("owner of tree x: %w", cause)
		assert.False(t, api.Internal(err), "%v", cause)
		assert.Equal(t, api.ErrUnavailable, api.ErrorOf(err).Type, "%v", cause)
		assert.Equal(t, http.StatusServiceUnavailable, api.StatusOf(err))
	}
}

// An error names a value the client sent without sending a huge one back
// whole: a 60 KB question id in the path or a long field name comes back
// as its first core.EchoLimit bytes and "…"; a message that quotes a value
// some other way (a long config field, through the JSON decoder) is cut.
func TestErrorsClipEchoedValues(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(16), nil)
	c := f.client(t, "")
	id := c.create()
	clipped := strings.Repeat("q", core.EchoLimit) + "…"
	p := "/v1/sessions/" + id + "/prompt"
	for _, r := range []struct {
		method, path, body string
		named              bool // the message names the value, clipped
	}{
		{"POST", "/v1/sessions/" + id + "/questions/" + strings.Repeat("q", 60<<10), `{"answers":[["a"]],"response_id":"r"}`, true},
		{"POST", p, `{"text":"a","` + strings.Repeat("q", 3000) + `":1}`, true},
		{"POST", p, `{"text":"a","mode":"` + strings.Repeat("q", 3000) + `"}`, false},
		{"POST", "/v1/sessions", `{"config":{"` + strings.Repeat("q", 3000) + `":1}}`, false},
	} {
		var e api.ErrorBody
		status := c.do(r.method, r.path, r.body, &e)
		assert.GreaterOrEqual(t, status, 400)
		assert.Less(t, len(e.Error.Message), 1100, "%s %.60s: %.200s", r.method, r.path, e.Error.Message)
		if r.named {
			assert.Contains(t, e.Error.Message, clipped, "the value is named, clipped")
		}
	}
}

func TestClipCutsAtACharacter(t *testing.T) {
	assert.Equal(t, "short", core.Clip("short"))
	exact := strings.Repeat("a", core.EchoLimit)
	assert.Equal(t, exact, core.Clip(exact))
	got := core.Clip("a" + strings.Repeat("é", 40)) // 81 bytes; byte 64 is inside an é
	assert.True(t, utf8.ValidString(got), got)
	assert.Equal(t, "a"+strings.Repeat("é", 31)+"…", got)
}

// A message quoting a client's value whole (a decoder's, say) is cut to
// 1 KiB when sent.
func TestWriteErrorClipsALongMessage(t *testing.T) {
	w := httptest.NewRecorder()
	api.WriteError(nethttp.Writer(w), &api.Error{Type: api.ErrInvalidRequest, Message: strings.Repeat("x", 5000)})
	var body api.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, strings.Repeat("x", 1024)+"…", body.Error.Message)
}

// A create's config is bounded as a prompt's text is: what one event can
// hold on every host. Each bound refuses one byte or name over it.
func TestDecodeCreateConfigLimits(t *testing.T) {
	config := func(c map[string]any) []byte {
		b, err := json.Marshal(map[string]any{"config": c})
		require.NoError(t, err)
		return b
	}
	names := func(n int, name string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = name
		}
		return out
	}
	for _, ok := range []map[string]any{
		{"system_prompt": strings.Repeat("<", api.MaxSystemPrompt)},
		{"model": strings.Repeat("m", api.MaxModelName)},
		{"tools": names(api.MaxConfigTools, strings.Repeat("t", api.MaxConfigToolName))},
		{"tools": []string{}},
	} {
		_, err := api.DecodeCreate(config(ok))
		assert.NoError(t, err)
	}
	for _, c := range []struct {
		config map[string]any
		typ    api.ErrorType
		msg    string
	}{
		{map[string]any{"system_prompt": strings.Repeat("<", api.MaxSystemPrompt+1)}, api.ErrPayloadTooLarge, "config.system_prompt is longer than 262144 bytes"},
		{map[string]any{"model": strings.Repeat("m", api.MaxModelName+1)}, api.ErrInvalidRequest, "config.model is longer than 256 bytes"},
		{map[string]any{"tools": names(api.MaxConfigTools+1, "t")}, api.ErrInvalidRequest, "config.tools names more than 256 tools"},
		{map[string]any{"tools": []string{"kv_get", strings.Repeat("t", api.MaxConfigToolName+1)}}, api.ErrInvalidRequest, "config.tools[1] must be a tool name of 1 to 64 bytes"},
		{map[string]any{"tools": []string{""}}, api.ErrInvalidRequest, "config.tools[0] must be a tool name of 1 to 64 bytes"},
	} {
		_, err := api.DecodeCreate(config(c.config))
		e := api.ErrorOf(err)
		assert.Equal(t, c.typ, e.Type, c.msg)
		assert.Equal(t, c.msg, e.Message)
	}
}

// A value the storage refuses as too big (a Durable Object's 2 MB, SQLite's
// SQLITE_TOOBIG) is the request's content: 413, not a 500.
func TestTooBigToStoreIs413(t *testing.T) {
	err := fmt.Errorf("create session: append session.created@1: %w", &storage.Error{Code: storage.CodeTooBig, Msg: "string or blob too big"})
	e := api.ErrorOf(err)
	assert.Equal(t, api.ErrPayloadTooLarge, e.Type)
	assert.False(t, api.Internal(err))
	w := httptest.NewRecorder()
	api.WriteError(nethttp.Writer(w), err)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
}
