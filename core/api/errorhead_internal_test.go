package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/logs"
)

// beginThenFail is a route that sends its head and part of its body (an
// event stream, a 200 body begun), then returns an error.
func beginThenFail(w httpmsg.ResponseWriter, _ *httpmsg.Request) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(httpmsg.StatusOK)
	_, _ = w.Write([]byte("data: one\n\n"))
	return errors.New("log read failed")
}

// A route that returns an error once its head is out is not answered
// with that error after it (a second header, a JSON error appended to the
// 200 body or the event stream): the response is aborted, as after a
// panic, and the error is logged, since the client is never told.
func TestRouteErrorAfterTheHeadAbortsTheResponse(t *testing.T) {
	var log bytes.Buffer
	h := handle(logs.New(slog.NewTextHandler(&log, nil)), "GET /v1/sessions/{id}/events", nil, beginThenFail)
	w := httptest.NewRecorder()
	require.PanicsWithValue(t, http.ErrAbortHandler, func() {
		nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/t/events?access_token=secret-token", nil))
	})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "data: one\n\n", w.Body.String(), "nothing appended to the answer begun")
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
	assert.Contains(t, log.String(), "level=ERROR")
	assert.Contains(t, log.String(), "log read failed")
	assert.Contains(t, log.String(), "path=/v1/sessions/t/events")
	assert.NotContains(t, log.String(), "secret-token")
}

// A writer that cannot abort (the guest's) gets nothing more either: the
// answer ends where the route stopped.
func TestRouteErrorAfterTheHeadWritesNothingMore(t *testing.T) {
	h := handle(logs.Discard(), "GET /x", nil, beginThenFail)
	w := plainWriter{httptest.NewRecorder()}
	h.ServeHTTP(w, &httpmsg.Request{Method: "GET", URL: &url.URL{Path: "/x"}})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "data: one\n\n", w.Body.String())
}

// Before the head is out, a returned error is the answer, as ever.
func TestRouteErrorBeforeTheHeadIsTheAnswer(t *testing.T) {
	h := handle(logs.Discard(), "GET /x", nil, func(httpmsg.ResponseWriter, *httpmsg.Request) error {
		return fail(ErrNotFound, "no such session")
	})
	w := httptest.NewRecorder()
	nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Contains(t, w.Body.String(), `"not_found"`)
}

// A route whose client went away (its request's context ended) and so
// returns an error after its head is routine: aborted, not logged as an
// error.
func TestRouteErrorAfterTheHeadOfAGoneClientIsNotAnError(t *testing.T) {
	var log bytes.Buffer
	h := handle(logs.New(slog.NewTextHandler(&log, nil)), "GET /v1/sessions/{id}/events", nil, beginThenFail)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	require.PanicsWithValue(t, http.ErrAbortHandler, func() {
		nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/t/events", nil).WithContext(ctx))
	})
	assert.Equal(t, "data: one\n\n", w.Body.String())
	assert.NotContains(t, log.String(), "level=ERROR")
}
