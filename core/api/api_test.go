package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/internal/treetest"
)

type client struct {
	t     testing.TB
	srv   *httptest.Server
	token string
}

type fixture struct {
	trees *memTrees
	h     *api.Handler
	srv   *httptest.Server
	clock *fakehost.Clock
	log   *lockedBuffer // what the handler logged
}

func newFixture(t testing.TB, d core.Driver, auth api.Authenticator) *fixture {
	return newFixtureWith(t, d, auth, api.NewConfig().WithMaxBody(4096))
}

func newFixtureWith(t testing.TB, d core.Driver, auth api.Authenticator, cfg api.Config) *fixture {
	if auth == nil {
		auth = api.Anonymous{}
	}
	f := &fixture{trees: newMemTrees(t, d), clock: fakehost.NewClock(treetest.Start), log: &lockedBuffer{}}
	h, err := api.New(api.Deps{Trees: f.trees, Auth: auth, Clock: f.clock, IDs: &fakehost.IDs{Prefix: "root"},
		Log: logs.New(slog.NewTextHandler(f.log, nil))}, cfg)
	require.NoError(t, err)
	f.h = h
	f.srv = httptest.NewServer(nethttp.Handler(h))
	t.Cleanup(func() { h.Close(); f.srv.Close() })
	return f
}

func (f *fixture) client(t testing.TB, token string) *client {
	return &client{t: t, srv: f.srv, token: token}
}

// send sends a request with the client's token and returns the answer,
// its body for the caller to read and close.
func (c *client) send(method, path, body string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	require.NoError(c.t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.srv.Client().Do(req)
	require.NoError(c.t, err)
	return resp
}

// do sends a request and decodes a JSON answer into out (if not nil).
func (c *client) do(method, path, body string, out any) int {
	c.t.Helper()
	resp := c.send(method, path, body)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	if out != nil && len(raw) > 0 {
		require.NoError(c.t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode
}

// errorType sends a request expected to fail and returns status and type.
func (c *client) errorType(method, path, body string) (int, api.ErrorType) {
	c.t.Helper()
	var e api.ErrorBody
	status := c.do(method, path, body, &e)
	return status, e.Error.Type
}

func (c *client) create() string {
	c.t.Helper()
	var out struct{ ID string }
	require.Equal(c.t, http.StatusCreated, c.do("POST", "/v1/sessions", "", &out))
	return out.ID
}

func TestHappyPath(t *testing.T) {
	d := treetest.NewDriver(16)
	f := newFixture(t, d, nil)
	c := f.client(t, "")
	var health map[string]bool
	require.Equal(t, 200, c.do("GET", "/healthz", "", &health))
	assert.True(t, health["ok"])

	id := c.create()
	var admitted struct {
		PromptID  string `json:"prompt_id"`
		Duplicate bool
	}
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hello","id":"p1"}`, &admitted))
	require.NotEmpty(t, admitted.PromptID)
	var again struct {
		PromptID  string `json:"prompt_id"`
		Duplicate bool
	}
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hello","id":"p1"}`, &again))
	assert.Equal(t, admitted.PromptID, again.PromptID)
	assert.True(t, again.Duplicate)
	f.trees.tree(id).node.Idle()

	var snap struct {
		ID       string
		Status   string
		Turns    int
		Cursor   int64
		Claim    *json.RawMessage
		Blockers []any
		Messages []struct{ Role, Text string }
	}
	require.Equal(t, 200, c.do("GET", "/v1/sessions/"+id, "", &snap))
	assert.Equal(t, "idle", snap.Status)
	assert.Equal(t, 1, snap.Turns)
	assert.Nil(t, snap.Claim)
	assert.Empty(t, snap.Blockers)
	require.Len(t, snap.Messages, 2)
	assert.Equal(t, "echo: hello", snap.Messages[1].Text)

	var list struct {
		Sessions   []struct{ ID string }
		NextCursor string `json:"next_cursor"`
	}
	require.Equal(t, 200, c.do("GET", "/v1/sessions", "", &list))
	require.Len(t, list.Sessions, 1)
	assert.Equal(t, id, list.Sessions[0].ID)

	var perms map[string][]any
	require.Equal(t, 200, c.do("GET", "/v1/sessions/"+id+"/permissions", "", &perms))
	assert.Empty(t, perms["permissions"])

	require.Equal(t, http.StatusNoContent, c.do("DELETE", "/v1/sessions/"+id, "", nil))
	status, typ := c.errorType("GET", "/v1/sessions/"+id, "")
	assert.Equal(t, 404, status)
	assert.Equal(t, api.ErrNotFound, typ)
}

func TestInterruptAnswersAfterCommit(t *testing.T) {
	d := treetest.NewDriver(16)
	f := newFixture(t, d, nil)
	c := f.client(t, "")
	id := c.create()
	require.Equal(t, 202, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hold"}`, nil))
	<-d.Started
	require.Equal(t, 202, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"queued"}`, nil))
	var out map[string]bool
	require.Equal(t, 200, c.do("POST", "/v1/sessions/"+id+"/interrupt", "", &out))
	assert.True(t, out["interrupted"])
	tree := f.trees.tree(id)
	tree.node.Crash() // right after the 200
	evs := tree.tree.Events(id)
	assert.Len(t, treetest.Terminals(evs), 1)
	assert.False(t, tree.tree.Claim(id).Exists)
}

// Every error row of docs/api.md, each produced by a real request.
func TestErrorRows(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a,bob:secret-b")
	require.NoError(t, err)
	f := newFixture(t, treetest.NewDriver(64), tokens)
	alice, bob, nobody := f.client(t, "secret-a"), f.client(t, "secret-b"), f.client(t, "")
	id := alice.create()
	p := "/v1/sessions/" + id + "/prompt"
	cases := []struct {
		name         string
		c            *client
		method, path string
		body         string
		status       int
		typ          api.ErrorType
	}{
		{"malformed JSON", alice, "POST", p, `{"text":`, 400, api.ErrInvalidJSON},
		{"not an object", alice, "POST", p, `"hello"`, 400, api.ErrInvalidJSON},
		{"trailing data", alice, "POST", p, `{"text":"a"} {}`, 400, api.ErrInvalidJSON},
		{"empty body", alice, "POST", p, ``, 400, api.ErrInvalidJSON},
		{"unknown field", alice, "POST", p, `{"text":"a","colour":1}`, 400, api.ErrInvalidRequest},
		{"wrong type", alice, "POST", p, `{"text":5}`, 400, api.ErrInvalidRequest},
		{"empty text", alice, "POST", p, `{"text":"  "}`, 400, api.ErrInvalidRequest},
		{"bad mode", alice, "POST", p, `{"text":"a","mode":"shout"}`, 400, api.ErrInvalidRequest},
		{"reserved id", alice, "POST", p, `{"text":"a","id":"notice-` + id + `.1-1"}`, 400, api.ErrInvalidRequest},
		{"bad config", alice, "POST", "/v1/sessions", `{"config":{"temperature":2}}`, 400, api.ErrInvalidRequest},
		{"bad limit", alice, "GET", "/v1/sessions?limit=0", ``, 400, api.ErrInvalidRequest},
		{"bad before", alice, "GET", "/v1/sessions/" + id + "?before=x", ``, 400, api.ErrInvalidRequest},
		{"bad after", alice, "GET", "/v1/sessions/" + id + "/events?after=-1", ``, 400, api.ErrInvalidRequest},
		{"signed limit", alice, "GET", "/v1/sessions?limit=%2B5", ``, 400, api.ErrInvalidRequest},
		{"signed before", alice, "GET", "/v1/sessions/" + id + "?before=%2B3", ``, 400, api.ErrInvalidRequest},
		{"before past 2^53-1", alice, "GET", "/v1/sessions/" + id + "?before=9007199254740992", ``, 400, api.ErrInvalidRequest},
		{"after past 2^53-1", alice, "GET", "/v1/sessions/" + id + "/events?after=9007199254740993", ``, 400, api.ErrInvalidRequest},
		{"delete child", alice, "DELETE", "/v1/sessions/" + id + ".1", ``, 400, api.ErrInvalidRequest},
		{"reply without response_id", alice, "POST", "/v1/sessions/" + id + "/permissions/r1", `{"reply":"once"}`, 400, api.ErrInvalidRequest},
		{"question reply with both", alice, "POST", "/v1/sessions/" + id + "/questions/q1", `{"answers":[],"cancel":true,"response_id":"x"}`, 400, api.ErrInvalidRequest},
		{"question reply with a permission's reply", alice, "POST", "/v1/sessions/" + id + "/questions/q1", `{"reply":"once","answers":[["a"]],"response_id":"x"}`, 400, api.ErrInvalidRequest},
		{"permission reply with cancel", alice, "POST", "/v1/sessions/" + id + "/permissions/r1", `{"reply":"once","cancel":true,"response_id":"x"}`, 400, api.ErrInvalidRequest},
		{"blank response_id", alice, "POST", "/v1/sessions/" + id + "/questions/q1", `{"answers":[["a"]],"response_id":" "}`, 400, api.ErrInvalidRequest},
		{"not UTF-8", alice, "POST", p, "{\"text\":\"a\xffb\"}", 400, api.ErrInvalidJSON},
		{"body too large", alice, "POST", p, `{"text":"` + strings.Repeat("a", 5000) + `"}`, 413, api.ErrPayloadTooLarge},
		{"no token", nobody, "GET", "/v1/sessions", ``, 401, api.ErrUnauthorized},
		{"bad token", f.client(t, "nope"), "GET", "/v1/sessions/" + id, ``, 401, api.ErrUnauthorized},
		{"unknown session", alice, "GET", "/v1/sessions/nope", ``, 404, api.ErrNotFound},
		{"another principal's session", bob, "GET", "/v1/sessions/" + id, ``, 404, api.ErrNotFound},
		{"another principal's prompt", bob, "POST", p, `{"text":"a"}`, 404, api.ErrNotFound},
		{"unknown child", alice, "GET", "/v1/sessions/" + id + ".7", ``, 404, api.ErrNotFound},
		{"prompt to another principal's child", bob, "POST", "/v1/sessions/" + id + ".1/prompt", `{"text":"a"}`, 404, api.ErrNotFound},
		{"interrupt of another principal's child", bob, "POST", "/v1/sessions/" + id + ".1/interrupt", ``, 404, api.ErrNotFound},
		{"child id under an unknown root", alice, "POST", "/v1/sessions/nope.1/prompt", `{"text":"a"}`, 404, api.ErrNotFound},
		{"unknown blocker", alice, "POST", "/v1/sessions/" + id + "/permissions/r1", `{"reply":"once","response_id":"x"}`, 404, api.ErrNotFound},
		{"unknown route", alice, "GET", "/v2/things", ``, 404, api.ErrNotFound},
		{"wrong method", alice, "PUT", "/v1/sessions/" + id, ``, 405, api.ErrMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.t = t
			status, typ := tc.c.errorType(tc.method, tc.path, tc.body)
			assert.Equal(t, tc.status, status)
			assert.Equal(t, tc.typ, typ)
		})
	}
	alice.t = t
	t.Run("conflict", func(t *testing.T) {
		alice.t = t
		require.Equal(t, 202, alice.do("POST", p, `{"text":"one","id":"same"}`, nil))
		status, typ := alice.errorType("POST", p, `{"text":"two","id":"same"}`)
		assert.Equal(t, 409, status)
		assert.Equal(t, api.ErrConflict, typ)
	})
	t.Run("unavailable", func(t *testing.T) {
		alice.t = t
		f.trees.fail = core.ErrFenced
		defer func() { f.trees.fail = nil }()
		status, typ := alice.errorType("GET", "/v1/sessions/"+id, "")
		assert.Equal(t, 503, status)
		assert.Equal(t, api.ErrUnavailable, typ)
	})
	t.Run("internal", func(t *testing.T) {
		alice.t = t
		f.trees.fail = errors.New("disk on fire")
		defer func() { f.trees.fail = nil }()
		var e api.ErrorBody
		status := alice.do("GET", "/v1/sessions/"+id, "", &e)
		assert.Equal(t, 500, status)
		assert.Equal(t, api.ErrInternal, e.Error.Type)
		assert.NotContains(t, e.Error.Message, "disk on fire", "internal detail is logged, not sent")
	})
}

// SSE accepts ?access_token= (EventSource cannot send headers); other
// routes do not.
func TestAccessTokenOnlyForEvents(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a")
	require.NoError(t, err)
	f := newFixture(t, treetest.NewDriver(4), tokens)
	id := f.client(t, "secret-a").create()
	anon := f.client(t, "")
	status, _ := anon.errorType("GET", "/v1/sessions/"+id+"?access_token=secret-a", "")
	assert.Equal(t, 401, status)
	resp, err := http.Get(f.srv.URL + "/v1/sessions/" + id + "/events?access_token=secret-a")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "id: 1\n", line)
}

// ?access_token= stands in only for a missing Authorization header: a
// request that sends one, of any scheme or form, is judged by the header.
func TestAccessTokenOnlyWithoutAuthorizationHeader(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a,bob:secret-b")
	require.NoError(t, err)
	for _, tc := range []struct {
		authorization []string // nil: no header
		query         string
		principal     string // "": 401
	}{
		{nil, "?access_token=secret-a", "alice"},
		{[]string{"Bearer secret-b"}, "?access_token=secret-a", "bob"},
		{[]string{"Bearer"}, "?access_token=secret-a", ""},
		{[]string{"Bearer "}, "?access_token=secret-a", ""},
		// An empty header is absent (Cloudflare drops it before the Worker
		// sees it), so the query's token stands in.
		{[]string{""}, "?access_token=secret-a", "alice"},
		{[]string{""}, "", ""},
		{[]string{"Basic YWxpY2U6c2VjcmV0LWE="}, "?access_token=secret-a", ""},
		{[]string{"Bearer wrong"}, "?access_token=secret-a", ""},
		// Two query tokens: which would count is a guess, as for two headers.
		{nil, "?access_token=secret-a&access_token=secret-b", ""},
		{nil, "?access_token=wrong&access_token=secret-a", ""},
		{[]string{"Bearer secret-b"}, "?access_token=x&access_token=y", "bob"},
	} {
		r := httptest.NewRequest("GET", "/v1/sessions/x/events"+tc.query, nil)
		if tc.authorization != nil {
			r.Header["Authorization"] = tc.authorization
		}
		principal, err := tokens.Authenticate(nethttp.Request(r), true)
		if tc.principal == "" {
			assert.ErrorIs(t, err, api.ErrUnauthorized, "%q", tc.authorization)
			continue
		}
		require.NoError(t, err, "%q", tc.authorization)
		assert.Equal(t, tc.principal, principal, "%q", tc.authorization)
	}
}

// Two query tokens are refused for being two, whatever their count: the
// error says so, as it does for two Authorization headers.
func TestDoubledAccessTokenSaysWhy(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a,bob:secret-b")
	require.NoError(t, err)
	for _, query := range []string{"?access_token=secret-a&access_token=secret-a", "?access_token=secret-a&access_token=secret-b&access_token=x"} {
		r := httptest.NewRequest("GET", "/v1/sessions/x/events"+query, nil)
		_, err := tokens.Authenticate(nethttp.Request(r), true)
		assert.ErrorIs(t, err, api.ErrUnauthorized, query)
		assert.ErrorContains(t, err, "more than one access_token", query)
	}
}

func TestTokensStoredHashed(t *testing.T) {
	_, err := api.ParseTokens("alice")
	assert.Error(t, err)
	_, err = api.ParseTokens("alice:sha256:zz")
	assert.Error(t, err)
	// A pre-hashed token works like the plain one.
	hashed, err := api.ParseTokens("alice:sha256:" + "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b")
	require.NoError(t, err)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer secret")
	p, err := hashed.Authenticate(nethttp.Request(r), false)
	require.NoError(t, err)
	assert.Equal(t, "alice", p)
}

// "anonymous" is the principal of a server without tokens: a token may not
// take it, or its trees would be anyone's on loopback once the tokens go.
func TestTokensRefuseTheAnonymousPrincipal(t *testing.T) {
	_, err := api.ParseTokens("alice:secret-a, anonymous:secret-b")
	assert.ErrorContains(t, err, `entry 2: the principal "anonymous" is reserved`)
	assert.NotContains(t, err.Error(), "secret-b", "no part of a token is printed")
	_, err = api.ParseTokens("anonymous:secret-b, alice:secret-a")
	assert.ErrorContains(t, err, `entry 1: the principal "anonymous" is reserved`, "the first entry too")
	_, err = api.ParseTokens("Anonymous:secret-b")
	assert.NoError(t, err, "principals are case-sensitive, as every principal check is")
}

// The Bearer scheme's name is case-insensitive (RFC 9110 §11.1); other
// schemes, and the scheme without a token, are no credential.
func TestBearerSchemeAnyCase(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret")
	require.NoError(t, err)
	for _, h := range []string{"Bearer secret", "bearer secret", "BEARER secret", "bEaReR  secret"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		p, err := tokens.Authenticate(nethttp.Request(r), false)
		require.NoError(t, err, h)
		assert.Equal(t, "alice", p, h)
	}
	for _, h := range []string{"Basic secret", "Bearersecret", "bearer", "Bearer ", "Bearer secret2"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		_, err := tokens.Authenticate(nethttp.Request(r), false)
		assert.ErrorIs(t, err, api.ErrUnauthorized, h)
	}
}

// Two Authorization headers are refused, whichever is valid: the local
// server answers as the Cloudflare front does (which joins them).
func TestTwoAuthorizationHeadersRefused(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret")
	require.NoError(t, err)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Add("Authorization", "Bearer secret")
	r.Header.Add("Authorization", "Bearer other")
	_, err = tokens.Authenticate(nethttp.Request(r), false)
	assert.ErrorIs(t, err, api.ErrUnauthorized)
}

// 405 names the allowed methods and 401 the scheme, as HTTP requires.
func TestErrorHeaders(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a")
	require.NoError(t, err)
	f := newFixture(t, treetest.NewDriver(4), tokens)
	req, err := http.NewRequest("PUT", f.srv.URL+"/v1/sessions", nil)
	require.NoError(t, err)
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 405, resp.StatusCode)
	assert.Equal(t, "GET, HEAD, POST", resp.Header.Get("Allow"))
	resp, err = f.srv.Client().Get(f.srv.URL + "/v1/sessions")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 401, resp.StatusCode)
	assert.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"))
}

// Client-facing messages name the problem without Go internals.
func TestErrorMessagesAreClean(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(8), nil)
	c := f.client(t, "")
	id := c.create()
	var e api.ErrorBody
	c.do("POST", "/v1/sessions", `{"config":{"model":5}}`, &e)
	assert.Equal(t, `config field "model" must be a string`, e.Error.Message)
	require.Equal(t, 202, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"a","id":"p-1"}`, nil))
	c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"b","id":"p-1"}`, &e)
	assert.Equal(t, `prompt id "p-1" was already used with a different body`, e.Error.Message)
}

// A new session's config takes the configured defaults for what its create
// request leaves out.
func TestSessionDefaultsFillMissingFields(t *testing.T) {
	d := treetest.NewDriver(4)
	trees := newMemTrees(t, d)
	tools := []string{"kv_get"}
	h, err := api.New(api.Deps{Trees: trees, Auth: api.Anonymous{}, Clock: fakehost.NewClock(treetest.Start), IDs: &fakehost.IDs{Prefix: "r"}},
		api.NewConfig().WithSessionDefaults(core.SessionConfig{SystemPrompt: "be brief", Model: "small", Tools: &tools}))
	require.NoError(t, err)
	srv := httptest.NewServer(nethttp.Handler(h))
	defer srv.Close()
	defer h.Close()
	c := &client{t: t, srv: srv}
	var out struct{ ID string }
	require.Equal(t, 201, c.do("POST", "/v1/sessions", `{"config":{"model":"large"}}`, &out))
	var snap struct{ Config core.SessionConfig }
	require.Equal(t, 200, c.do("GET", "/v1/sessions/"+out.ID, "", &snap))
	assert.Equal(t, "be brief", snap.Config.SystemPrompt)
	assert.Equal(t, "large", snap.Config.Model, "the request wins")
	require.NotNil(t, snap.Config.Tools)
	assert.Equal(t, tools, *snap.Config.Tools)

	// An empty list is the request's own choice (no tools), not a gap to fill.
	require.Equal(t, 201, c.do("POST", "/v1/sessions", `{"config":{"tools":[]}}`, &out))
	snap.Config = core.SessionConfig{}
	require.Equal(t, 200, c.do("GET", "/v1/sessions/"+out.ID, "", &snap))
	require.NotNil(t, snap.Config.Tools)
	assert.Empty(t, *snap.Config.Tools)
}

// With an allow-list, a create naming another model is refused 400 naming
// the field (the probe's "o1-pro-expensive" never reaches the provider);
// an allowed model and the default are created; a default outside the list
// is a configuration error at start.
func TestAllowedModelsOnCreate(t *testing.T) {
	d := treetest.NewDriver(4)
	trees := newMemTrees(t, d)
	deps := api.Deps{Trees: trees, Auth: api.Anonymous{}, Clock: fakehost.NewClock(treetest.Start), IDs: &fakehost.IDs{Prefix: "r"}}
	names := []string{"small", "large"}
	allowed := api.NewConfig().WithAllowedModels(names)
	h, err := api.New(deps, allowed.WithSessionDefaults(core.SessionConfig{Model: "small"}))
	require.NoError(t, err)
	names[1] = "o1-pro-expensive" // the configuration keeps its own copy
	srv := httptest.NewServer(nethttp.Handler(h))
	defer srv.Close()
	defer h.Close()
	c := &client{t: t, srv: srv}

	var e api.ErrorBody
	require.Equal(t, 400, c.do("POST", "/v1/sessions", `{"config":{"model":"o1-pro-expensive"}}`, &e))
	assert.Equal(t, api.ErrInvalidRequest, e.Error.Type)
	assert.Equal(t, `config field "model": "o1-pro-expensive" is not allowed on this server (allowed: small, large)`, e.Error.Message)
	var list struct{ Sessions []json.RawMessage }
	require.Equal(t, 200, c.do("GET", "/v1/sessions", "", &list))
	assert.Empty(t, list.Sessions, "nothing was created")

	for body, want := range map[string]string{`{"config":{"model":"large"}}`: "large", `{}`: "small"} {
		var out struct{ ID string }
		require.Equal(t, 201, c.do("POST", "/v1/sessions", body, &out), body)
		var snap struct{ Config core.SessionConfig }
		require.Equal(t, 200, c.do("GET", "/v1/sessions/"+out.ID, "", &snap))
		assert.Equal(t, want, snap.Config.Model, body)
	}

	_, err = api.New(deps, allowed.WithSessionDefaults(core.SessionConfig{Model: "o1-pro-expensive"}))
	assert.ErrorContains(t, err, `the session defaults' model "o1-pro-expensive" is not among the allowed models`)
	_, err = api.New(deps, api.NewConfig().WithSessionDefaults(core.SessionConfig{Model: "anything"}))
	assert.NoError(t, err, "no list allows any model")
	_, err = api.New(deps, api.NewConfig().WithAllowedModels([]string{}).WithSessionDefaults(core.SessionConfig{Model: "anything"}))
	assert.Error(t, err, "an empty list allows none")
}

// A client's own rule cannot be final: only the operator's rules are.
func TestSessionRuleCannotBeFinal(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(4), nil)
	c := f.client(t, "")
	var e api.ErrorBody
	require.Equal(t, 400, c.do("POST", "/v1/sessions", `{"config":{"permissions":[{"action":"*","resource":"*","decision":"ask","final":true}]}}`, &e))
	assert.Equal(t, `config field "permissions[0].final": only the server's rules can be final`, e.Error.Message)
}

// One token may not name two principals: it would let one act as the other.
// An empty token never names a principal: not in the header, not in
// ?access_token=, and an entry that is the hash of an empty token is
// refused when the tokens are read, so no principal can be entered with
// no token at all.
func TestEmptyTokenRefused(t *testing.T) {
	const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	_, err := api.ParseTokens("alice:sha256:" + emptyHash)
	require.ErrorContains(t, err, `principal "alice": sha256: is the hash of an empty token`)
	_, err = api.ParseTokens("alice:sha256:" + strings.ToUpper(emptyHash))
	require.Error(t, err)

	tokens, err := api.ParseTokens("alice:secret")
	require.NoError(t, err)
	bearer := httptest.NewRequest("GET", "/", nil)
	bearer.Header.Set("Authorization", "Bearer ")
	for _, r := range []*http.Request{
		bearer,
		httptest.NewRequest("GET", "/?access_token=", nil),
		httptest.NewRequest("GET", "/?access_token", nil),
	} {
		_, err := tokens.Authenticate(nethttp.Request(r), true)
		require.ErrorIs(t, err, api.ErrUnauthorized, r.URL.String())
		assert.ErrorContains(t, err, "a bearer token is required", r.URL.String())
	}
}

// White space around an entry's ':' is refused when the tokens are read:
// it would belong to the principal's name or to the token, and a token
// that begins or ends with it can never be presented (header values are
// trimmed, and so are the spaces after "Bearer"), so the server would
// start with a principal locked out. Around whole entries it is ignored,
// and inside a token it is the token's.
func TestTokenEntryWhiteSpaceAroundColonRefused(t *testing.T) {
	for _, spec := range []string{"alice :s3cret", "alice: s3cret", "alice : s3cret", "bob:b,carol\t:c", "alice:\ts3cret", "alice:sha256: e3b0"} {
		_, err := api.ParseTokens(spec)
		require.Error(t, err, "%q", spec)
		assert.NotContains(t, err.Error(), "s3cret", "no part of a token is printed")
	}
	_, err := api.ParseTokens("alice : s3cret")
	assert.EqualError(t, err, "REVENANT_TOKENS: entry 1 (counting from 1, comma-separated) has white space around its ':'; write principal:token")

	tokens, err := api.ParseTokens(" alice:s3cret , bob:tok with space ")
	require.NoError(t, err)
	for token, principal := range map[string]string{"s3cret": "alice", "tok with space": "bob"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		got, err := tokens.Authenticate(nethttp.Request(r), false)
		require.NoError(t, err, token)
		assert.Equal(t, principal, got)
	}
}

func TestSharedTokenRefused(t *testing.T) {
	_, err := api.ParseTokens("alice:same-token,bob:same-token")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "share a token")
}

// HEAD on the events route answers with the stream's headers and ends.
func TestHeadEventsReturns(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(4), nil)
	id := f.client(t, "").create()
	resp, err := f.srv.Client().Head(f.srv.URL + "/v1/sessions/" + id + "/events")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	resp, err = f.srv.Client().Get(f.srv.URL + "/healthz") // the connection is free again
	require.NoError(t, err)
	resp.Body.Close()
}

// A tree whose storage refuses writes serves reads, says it is read-only in
// the snapshot, and answers writes 503 read_only at once; it is writable
// again as soon as storage takes a write.
func TestReadOnlyTreeServesReadsAndRefusesWrites(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(8), nil)
	c := f.client(t, "")
	id := c.create()
	fault := f.trees.rebootFull(id)

	var snap struct {
		Status   string `json:"status"`
		ReadOnly bool   `json:"read_only"`
	}
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &snap))
	assert.True(t, snap.ReadOnly)
	assert.Equal(t, "idle", snap.Status)
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id+"/questions", "", nil), "reads work")

	var e api.ErrorBody
	status := c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hello"}`, &e)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, api.ErrReadOnly, e.Error.Type)
	assert.Contains(t, e.Error.Message, "read-only")
	status, typ := c.errorType("POST", "/v1/sessions/"+id+"/interrupt", "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, api.ErrReadOnly, typ)

	fault.Heal()
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hello"}`, nil))
	var raw map[string]any
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &raw))
	assert.NotContains(t, raw, "read_only", "omitted once writable")
}

// Another principal's requests on a tree are 404 and never reach Get, which
// boots a tree that is not running (a new epoch and a sweep that resumes
// turns): the owner is checked from the index first. The tree's events do
// not change.
func TestForeignTreeIsNeverBooted(t *testing.T) {
	tokens, err := api.ParseTokens("alice:secret-a,bob:secret-b")
	require.NoError(t, err)
	f := newFixture(t, treetest.NewDriver(8), tokens)
	alice, bob := f.client(t, "secret-a"), f.client(t, "secret-b")
	id := alice.create()
	before := f.trees.tree(id).tree.Events(id)
	gets := f.trees.getCalls(id)

	s := "/v1/sessions/" + id
	for _, rq := range []struct{ method, path, body string }{
		{"GET", s, ""},
		{"GET", s + ".1", ""},
		{"POST", s + "/prompt", `{"text":"spend alice's money"}`},
		{"POST", s + "/interrupt", ""},
		{"GET", s + "/events", ""},
		{"GET", s + "/permissions", ""},
		{"POST", s + "/permissions/r1", `{"reply":"once","response_id":"x"}`},
		{"GET", s + "/questions", ""},
		{"POST", s + "/questions/q1", `{"cancel":true,"response_id":"x"}`},
		{"DELETE", s, ""},
	} {
		// The body is read only for a 404: were bob let in, his GET of the
		// events would be a stream that never ends, and the test would
		// hang instead of failing.
		resp := bob.send(rq.method, rq.path, rq.body)
		var e api.ErrorBody
		if resp.StatusCode == http.StatusNotFound {
			assert.NoError(t, json.NewDecoder(resp.Body).Decode(&e), "%s %s", rq.method, rq.path)
		}
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s %s", rq.method, rq.path)
		assert.Equal(t, api.ErrNotFound, e.Error.Type, "%s %s", rq.method, rq.path)
	}
	assert.Equal(t, gets, f.trees.getCalls(id), "bob's requests reached Get (a boot)")
	assert.Equal(t, before, f.trees.tree(id).tree.Events(id))
	require.Equal(t, http.StatusOK, alice.do("GET", s, "", nil))
	assert.Equal(t, gets+1, f.trees.getCalls(id), "the owner's request does reach Get")
}

// A malformed REVENANT_TOKENS entry may be a bare token, or a piece of one
// cut at a comma: the error names it by position and prints no part of it.
// (The token shares no 4 characters with the message's own words.)
func TestTokenErrorsPrintNoToken(t *testing.T) {
	const token = "Zq8xW4vR-k2Jm9Pt"
	for _, spec := range []string{
		token,
		token + ":",
		":" + token,
		"alice:ok-token," + token,
		"alice:" + token[:5] + "," + token[5:],
	} {
		_, err := api.ParseTokens(spec)
		require.Error(t, err, spec)
		assertNoPieceOf(t, err.Error(), token)
	}
}

// assertNoPieceOf fails if text holds any 4 or more bytes of secret in a row.
func assertNoPieceOf(t *testing.T, text, secret string) {
	t.Helper()
	for i := 0; i+4 <= len(secret); i++ {
		assert.NotContains(t, text, secret[i:i+4], "the error prints part of the token")
	}
}

// An optional prompt field given null is the same as absent (docs/api.md,
// Conventions): mode null is a queue prompt, id null no key; a required
// one given null is refused as empty.
func TestPromptNullOptionalFieldsAreAbsent(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(16), nil)
	c := f.client(t, "")
	id := c.create()
	p := "/v1/sessions/" + id + "/prompt"
	var a struct {
		PromptID  string `json:"prompt_id"`
		Duplicate bool
	}
	require.Equal(t, http.StatusAccepted, c.do("POST", p, `{"text":"a","mode":null}`, &a))
	require.Equal(t, http.StatusAccepted, c.do("POST", p, `{"text":"a","id":null}`, &a))
	assert.False(t, a.Duplicate, "a null id is no key")
	status, typ := c.errorType("POST", p, `{"text":null}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, api.ErrInvalidRequest, typ)
}

// A prompt's id names its body, text and mode (docs/api.md, Idempotency):
// an absent mode is queue, so a retry that spells it out is the same
// prompt, answered duplicate with the first prompt id; the same id and text
// with another mode is another body, 409 conflict, and admits nothing.
func TestPromptRetryBodyIsTextAndMode(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(16), nil)
	c := f.client(t, "")
	id := c.create()
	p := "/v1/sessions/" + id + "/prompt"
	type admission struct {
		PromptID  string `json:"prompt_id"`
		Duplicate bool
	}
	var first admission
	require.Equal(t, http.StatusAccepted, c.do("POST", p, `{"id":"a","text":"hi"}`, &first))
	require.False(t, first.Duplicate)
	for _, body := range []string{`{"id":"a","text":"hi","mode":"queue"}`, `{"id":"a","text":"hi","mode":null}`} {
		var again admission
		require.Equal(t, http.StatusAccepted, c.do("POST", p, body, &again), body)
		assert.True(t, again.Duplicate, "an absent mode is queue: %s", body)
		assert.Equal(t, first.PromptID, again.PromptID, body)
	}

	require.Equal(t, http.StatusAccepted, c.do("POST", p, `{"id":"b","text":"hi","mode":"queue"}`, nil))
	status, typ := c.errorType("POST", p, `{"id":"b","text":"hi","mode":"replace"}`)
	assert.Equal(t, http.StatusConflict, status, "the same id and text with another mode is another body")
	assert.Equal(t, api.ErrConflict, typ)
	status, typ = c.errorType("POST", p, `{"id":"a","text":"hi","mode":"replace"}`)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, api.ErrConflict, typ)
}

// ReadsBody names exactly the routes that answer 413 to a body over
// max_body (the Cloudflare front refuses a declared one on these only).
func TestRouteReadsBodyAsTheHandlers(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(16), nil)
	c := f.client(t, "")
	id := c.create()
	big := strings.Repeat(" ", 4097) // the fixture's max_body is 4096
	for _, rt := range api.Routes {
		if rt.Method == "GET" || rt.Method == "DELETE" { // neither reads a body; DELETE would end the tree
			continue
		}
		path := strings.NewReplacer("{id}", id, "{rid}", "p-nope-0", "{qid}", "q-nope-0").Replace(rt.Pattern)
		status := c.do(rt.Method, path, big, nil)
		assert.Equal(t, rt.ReadsBody(), status == http.StatusRequestEntityTooLarge, "%s %s answered %d", rt.Method, rt.Pattern, status)
	}
}

// A cursor is a whole number from 0 to 2^53-1 (api.MaxCursor), the most a
// Durable Object's SQL takes: the largest is served on every host, one
// more is 400 naming the parameter.
func TestCursorsUpToMaxCursor(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(1), nil)
	alice := f.client(t, "")
	id := alice.create()
	var snap struct{ Messages []json.RawMessage }
	require.Equal(t, http.StatusOK, alice.do("GET", "/v1/sessions/"+id+"?before=9007199254740991", "", &snap))
	var e api.ErrorBody
	require.Equal(t, http.StatusBadRequest, alice.do("GET", "/v1/sessions/"+id+"?before=9007199254740992", "", &e))
	assert.Equal(t, "before must be a whole number from 0 to 9007199254740991", e.Error.Message)
	assert.EqualValues(t, 1<<53-1, api.MaxCursor)
}

// An unknown session of the caller's own tree is 404 whatever the body: on
// every route that reads one, the session is looked up first (docs/api.md).
func TestUnknownSessionIsNotFoundWhateverTheBody(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(1), nil)
	alice := f.client(t, "")
	child := "/v1/sessions/" + alice.create() + ".99"
	for _, path := range []string{child + "/prompt", child + "/permissions/x", child + "/questions/x"} {
		for _, body := range []string{`{}`, `{"text":`, ``, `{"colour":1}`, `{"text":"` + strings.Repeat("a", 5000) + `"}`} {
			status, typ := alice.errorType("POST", path, body)
			assert.Equal(t, http.StatusNotFound, status, "%s with %.20s", path, body)
			assert.Equal(t, api.ErrNotFound, typ, "%s with %.20s", path, body)
		}
	}
}

// The configured page sizes (WithPageSizes) are what a list and a snapshot
// return when the request names no limit; a list's next_cursor pages on
// to the end, and a snapshot's messages_before says older messages exist.
func TestConfiguredPageSizesAreTheDefaultLimits(t *testing.T) {
	f := newFixtureWith(t, offlineRunner(t), nil, api.NewConfig().WithPageSizes(2, 3))
	c := f.client(t, "")
	ids := map[string]bool{}
	for range 3 {
		ids[c.create()] = true
	}
	type page struct {
		Sessions   []struct{ ID string }
		NextCursor string `json:"next_cursor"`
	}
	var first, second page
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions", "", &first))
	require.Len(t, first.Sessions, 2, "the configured list page")
	require.NotEmpty(t, first.NextCursor)
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions?cursor="+url.QueryEscape(first.NextCursor), "", &second))
	require.Len(t, second.Sessions, 1)
	assert.Empty(t, second.NextCursor, "the last page")
	listed := map[string]bool{}
	for _, s := range append(first.Sessions, second.Sessions...) {
		listed[s.ID] = true
	}
	assert.Equal(t, ids, listed, "every session once")

	id := first.Sessions[0].ID
	for _, text := range []string{"one", "two"} {
		require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"`+text+`"}`, nil))
		f.trees.tree(id).node.Idle()
	}
	var snap struct {
		Messages       []struct{ Seq int64 }
		MessagesBefore *int64 `json:"messages_before"`
	}
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &snap))
	require.Len(t, snap.Messages, 3, "the configured message page: the newest three of four")
	require.NotNil(t, snap.MessagesBefore)
	assert.Equal(t, snap.Messages[0].Seq, *snap.MessagesBefore)
	before := *snap.MessagesBefore
	snap.Messages, snap.MessagesBefore = nil, nil
	require.Equal(t, http.StatusOK, c.do("GET", fmt.Sprintf("/v1/sessions/%s?before=%d", id, before), "", &snap))
	assert.Len(t, snap.Messages, 1, "the oldest")
	assert.Nil(t, snap.MessagesBefore, "nothing older")
}

// lockedBuffer is a log destination written by a server's goroutines and
// read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
