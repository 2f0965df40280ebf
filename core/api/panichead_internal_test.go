package api

import (
	"bytes"
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

// beginThenPanic is a route that sends its head and part of its body
// (an event stream, a 200 body begun), then panics.
func beginThenPanic(w httpmsg.ResponseWriter, _ *httpmsg.Request) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(httpmsg.StatusOK)
	_, _ = w.Write([]byte("data: one\n\n"))
	panic("stream cut short")
}

// flushThenPanic is a route whose head goes out with its first flush
// (200, no WriteHeader), then panics.
func flushThenPanic(w httpmsg.ResponseWriter, _ *httpmsg.Request) error {
	w.(httpmsg.Flusher).Flush()
	panic("stream cut short")
}

// A head sent by a flush alone counts as sent: the response is aborted,
// not given a 500's second header.
func TestRoutePanicAfterAFlushAbortsTheResponse(t *testing.T) {
	h := handle(logs.Discard(), "GET /v1/sessions/{id}/events", func(string) {}, flushThenPanic)
	w := httptest.NewRecorder()
	require.PanicsWithValue(t, http.ErrAbortHandler, func() {
		nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/t/events", nil))
	})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, w.Body.String())
}

// A route that panics once its head is out is not answered 500 after it
// (a second header, a JSON error appended to the body, read by the client
// as more of the answer): the response is aborted as the server aborts
// one (net/http's http.ErrAbortHandler), and the host is still told. The
// panic is logged with its stack, the request's method and path, and not
// its query, which may hold an access token.
func TestRoutePanicAfterTheHeadAbortsTheResponse(t *testing.T) {
	var log bytes.Buffer
	told := ""
	h := handle(logs.New(slog.NewTextHandler(&log, nil)), "GET /v1/sessions/{id}/events", func(route string) { told = route }, beginThenPanic)
	w := httptest.NewRecorder()
	require.PanicsWithValue(t, http.ErrAbortHandler, func() {
		nethttp.Handler(h).ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/t/events?access_token=secret-token", nil))
	})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "data: one\n\n", w.Body.String(), "nothing appended to the answer begun")
	assert.Equal(t, "text/event-stream", w.Header().Get("Content-Type"))
	assert.Equal(t, "GET /v1/sessions/{id}/events", told)
	assert.Contains(t, log.String(), "level=ERROR")
	assert.Contains(t, log.String(), "handler panicked")
	assert.Contains(t, log.String(), "method=GET")
	assert.Contains(t, log.String(), "path=/v1/sessions/t/events")
	assert.Contains(t, log.String(), "beginThenPanic", "the stack")
	assert.NotContains(t, log.String(), "secret-token")
}

// plainWriter is a ResponseWriter with no way to abort (httpmsg.Aborter).
type plainWriter struct{ *httptest.ResponseRecorder }

func (w plainWriter) Header() httpmsg.Header { return httpmsg.Header(w.ResponseRecorder.Header()) }

// A writer that cannot abort gets nothing more either: the answer ends
// where the panic cut it.
func TestRoutePanicAfterTheHeadWritesNothingMore(t *testing.T) {
	h := handle(logs.New(slog.DiscardHandler), "GET /x", nil, beginThenPanic)
	w := plainWriter{httptest.NewRecorder()}
	h.ServeHTTP(w, &httpmsg.Request{Method: "GET", URL: &url.URL{Path: "/x"}})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "data: one\n\n", w.Body.String())
}
