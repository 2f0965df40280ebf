package nethttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
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

// TestClientResendsAfterAReusedConnectionCloses: a request with a body sent
// through the adapter can be sent again, as net/http does when the pooled
// connection it reused closes before answering (here: the server reads the
// second request on its first connection and hangs up). Without GetBody
// passed through, net/http cannot reread the body and the call fails (EOF).
func TestClientResendsAfterAReusedConnectionCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go serveOneThenHangUp(c, n == 0)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	c := nethttp.Client(&http.Client{Transport: &http.Transport{}})
	for i := range 2 {
		req, err := httpmsg.NewRequest(context.Background(), "POST", "http://"+ln.Addr().String()+"/", strings.NewReader("body"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k")
		resp, err := c.Do(req)
		require.NoError(t, err, "request %d", i)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.Equal(t, "got body", string(b), "request %d", i)
	}
}

// serveOneThenHangUp answers requests on c; with hangUp, it answers the
// first and closes c once it has read the second.
func serveOneThenHangUp(c net.Conn, hangUp bool) {
	defer c.Close()
	r := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		if hangUp && n == 1 {
			return
		}
		body := "got " + string(b)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
	}
}
