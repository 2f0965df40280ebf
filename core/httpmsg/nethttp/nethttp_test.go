package nethttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
)

func TestHandlerSeesTheRequestAndFlushes(t *testing.T) {
	h := nethttp.Handler(httpmsg.HandlerFunc(func(w httpmsg.ResponseWriter, r *httpmsg.Request) {
		body, _ := io.ReadAll(r.Body)
		_, flushes := w.(httpmsg.Flusher)
		w.Header().Set("x-echo", r.Method+" "+r.URL.Path+" "+r.URL.Query().Get("q")+" "+r.Header.Get("x-in")+" "+string(body))
		w.WriteHeader(httpmsg.StatusAccepted)
		_, _ = io.WriteString(w, map[bool]string{true: "flusher", false: "plain"}[flushes])
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/a%2Fb?q=1", strings.NewReader("hi"))
	req.Header.Set("X-In", "v")
	h.ServeHTTP(rec, req)
	assert.Equal(t, 202, rec.Code)
	assert.Equal(t, "POST /a/b 1 v hi", rec.Header().Get("X-Echo"))
	assert.Equal(t, "flusher", rec.Body.String(), "a recorder flushes, so the adapter's writer does")
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/from" {
			http.Redirect(w, r, "/to", http.StatusFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte(r.Header.Get("X-In")+":"), b...))
	}))
	defer srv.Close()
	c := nethttp.Client(srv.Client())

	req, err := httpmsg.NewRequest(context.Background(), "GET", srv.URL+"/from", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, 302, resp.StatusCode)
	assert.Equal(t, "/to", resp.Header.Get("Location"))

	req, err = httpmsg.NewRequest(context.Background(), "POST", srv.URL+"/to", strings.NewReader("body"))
	require.NoError(t, err)
	req.Header.Set("x-in", "h")
	resp, err = c.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "h:body", string(b))
	assert.Same(t, req, resp.Request)
}
