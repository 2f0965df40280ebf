package host_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/host"
)

// A request whose client went away before it was served is routine: it is
// answered 503 (which no one reads), never 500, and nothing is logged at
// error level, so a client hanging up does not look like a server fault.
func TestCancelledRequestIsNotAnError(t *testing.T) {
	e := newEnv(t)
	h := e.open(e.config())
	var log bytes.Buffer
	a, err := api.New(api.Deps{Trees: h, Auth: api.Anonymous{}, Clock: host.RealClock{}, IDs: &fakehost.IDs{Prefix: "api"},
		Log: logs.New(slog.NewTextHandler(&log, nil))}, api.NewConfig())
	require.NoError(t, err)
	srv := nethttp.Handler(a)
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("POST", "/v1/sessions", bytes.NewBufferString(`{}`)))
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	w = httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", "/v1/sessions/api1", nil).WithContext(gone))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
	assert.NotContains(t, log.String(), "level=ERROR")
}
