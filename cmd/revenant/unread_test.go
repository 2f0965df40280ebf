package main

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A request answered without its body (an unknown session's 404, say)
// must be answered at once even when the client declared a body it never
// sends in full: docs/api.md promises 404 whatever the body. Without
// answerUnread, net/http first reads the rest of a small unread body, so
// the answer waits for the read timeout, and then never goes out.
func TestAnswerUnreadBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := answerUnread(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound) // the body is never read
	}))
	srv := &http.Server{Handler: h, ReadTimeout: time.Hour}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-served
	})

	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("POST /v1/sessions/nosuch/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\nx"))
	require.NoError(t, err)
	// A guard, not a wait: the answer needs no more input from us.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "no answer while the declared body is incomplete")
	defer resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
