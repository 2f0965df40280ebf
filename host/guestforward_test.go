package host_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/host"
)

// guestServer serves h (running guests) with a GuestHandler configured by
// cfg and logging to log, and returns its URL and the handler.
func guestServer(t *testing.T, h *host.Host, cfg api.Config, log *slog.Logger) (string, *host.GuestHandler) {
	t.Helper()
	auth, err := api.ParseTokens(tokenSpec)
	require.NoError(t, err)
	g, err := host.NewGuestHandler(h, auth, cfg, log)
	require.NoError(t, err)
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv.URL, g
}

// A child session (root.1) is served by its root's tree's guest: the
// host routes by the root's id, the part before the first dot.
func TestGuestServesChildSessions(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfig())
	base := apiServer(t, h, true)
	id := create(t, base)
	a := call(t, base, "POST", "/v1/sessions/"+id+"/prompt", "alice-token", `{"text":"/task hello child"}`)
	require.Equal(t, http.StatusAccepted, a.Status, a.raw)
	follow(t, base, id, "session.execution.succeeded@1")
	child := call(t, base, "GET", "/v1/sessions/"+id+".1", "alice-token", "")
	require.Equal(t, http.StatusOK, child.Status, child.raw)
	assert.Equal(t, id+".1", child.Body["id"])
	other := call(t, base, "GET", "/v1/sessions/"+id+".1", "bob-token", "")
	assert.Equal(t, http.StatusNotFound, other.Status, "another principal's child")
}

// What the guest answers a create is the client's answer, and only a 201
// makes a tree: a create the host's check lets through but the guest
// refuses (here a body over the guest's size limit, the host's being
// larger) is answered as the guest answered it and leaves no tree. The
// guest's created_at header, meant for the index, never reaches the
// client.
func TestGuestRefusedCreateLeavesNoTree(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfig())
	base, _ := guestServer(t, h, api.NewConfig().WithMaxBody(4*api.DefaultMaxBody), nil)

	big := `{"config":{}}` + strings.Repeat(" ", int(api.DefaultMaxBody))
	refused := call(t, base, "POST", "/v1/sessions", "alice-token", big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, refused.Status, refused.raw)
	assert.Empty(t, rootIDsOf(t, h), "a refused create makes no tree")
	entries, err := os.ReadDir(e.dir + "/trees")
	require.NoError(t, err)
	assert.Empty(t, entries, "nor leaves its files")

	req, err := http.NewRequest("POST", base+"/v1/sessions", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(api.CreatedAtHeader), "the index's header stays in the host")
	assert.Len(t, rootIDsOf(t, h), 1)
}

// A guest's tree is listed with its root session's created_at, which the
// guest tells the host in its create answer: the list says what the
// session says, though the guest's clock is not the host's.
func TestGuestListShowsTheRootSessionsCreatedAt(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfig())
	base := apiServer(t, h, true)
	id := create(t, base)
	s := call(t, base, "GET", "/v1/sessions/"+id, "alice-token", "")
	require.Equal(t, http.StatusOK, s.Status, s.raw)
	list := call(t, base, "GET", "/v1/sessions", "alice-token", "")
	require.Equal(t, http.StatusOK, list.Status, list.raw)
	sessions := list.Body["sessions"].([]any)
	require.Len(t, sessions, 1)
	assert.Equal(t, s.Body["created_at"], sessions[0].(map[string]any)["created_at"])
	assert.NotEqual(t, float64(e.clock.Now()), s.Body["created_at"], "the guest's clock, not the host's")
}

// A token in the query is a credential for the event stream only: on any
// other route of a tree it is refused (401) before the tree is booted, in
// both modes.
func TestQueryTokenOpensOnlyTheStream(t *testing.T) {
	inBothModes(t, func(t *testing.T, e *env, cfg host.Config, guest bool) {
		h := e.open(cfg)
		base := apiServer(t, h, guest)
		id := create(t, base)
		e.clock.Advance(time.Hour)
		require.Equal(t, 1, h.EvictIdle(ctx))
		booted := e.bootedIDs()
		s := "/v1/sessions/" + id
		for _, rq := range []struct{ method, path, body string }{
			{"GET", s, ""},
			{"POST", s + "/prompt", `{"text":"hi"}`},
			{"GET", s + "/questions", ""},
		} {
			a := call(t, base, rq.method, rq.path+"?access_token=alice-token", "", rq.body)
			assert.Equal(t, http.StatusUnauthorized, a.Status, "%s %s", rq.method, rq.path)
		}
		assert.Equal(t, booted, e.bootedIDs(), "a refused request booted the tree")
	})
}

// The handler's Close ends the event streams it forwards (the server
// calls it before it shuts down, which waits for them).
func TestGuestHandlerCloseEndsStreams(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfig())
	base, g := guestServer(t, h, api.NewConfig(), nil)
	id := create(t, base)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second) // fails the test rather than hanging it
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, "GET", base+"/v1/sessions/"+id+"/events?access_token=alice-token", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	g.Close()
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, sctx.Err(), "the stream did not end at Close")
}

// A failure of the host's own (a tree that cannot boot) is answered 500
// and its detail is logged, as core/api logs its internal errors.
func TestGuestHostInternalErrorIsLogged(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.guestConfig())
	var logs bytes.Buffer
	base, _ := guestServer(t, h, api.NewConfig(), slog.New(slog.NewTextHandler(&logs, nil)))
	id := create(t, base)
	e.clock.Advance(time.Hour)
	require.Equal(t, 1, h.EvictIdle(ctx))
	require.NoError(t, os.WriteFile(e.treePath(id), []byte(strings.Repeat("not a database ", 400)), 0o600))

	a := call(t, base, "GET", "/v1/sessions/"+id, "alice-token", "")
	assert.Equal(t, http.StatusInternalServerError, a.Status, a.raw)
	assert.NotContains(t, a.raw, "database", "the detail is not the client's")
	assert.Contains(t, logs.String(), "request failed")
	assert.Contains(t, logs.String(), id)
}
