package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveLoopback serves h on a loopback port until the test ends and
// returns a connection to it.
func serveLoopback(t *testing.T, h http.Handler) net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// An hour: the test must not pass by waiting the read timeout out.
	srv := &http.Server{Handler: closeUnread(h), ReadTimeout: time.Hour}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-served
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// A guard, not a wait: every answer below needs no more input.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	return c
}

// A request answered without its body (an unknown session's 404, an
// interrupt's 200) is answered at once even when the client declared more
// body than it sends, or sent a chunked body it never ends: docs/api.md
// promises 404 whatever the body. Without closeUnread, net/http first
// reads the rest of a small unread body, so the answer waits for the read
// timeout. The connection is not reused. Every way an answer can start
// counts: a status, a write alone (net/http's implicit 200), a flush.
func TestAnswerUnreadBody(t *testing.T) {
	answers := []struct {
		name   string
		status int
		answer func(w http.ResponseWriter)
	}{
		{"404", http.StatusNotFound, func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) }},
		{"200", http.StatusOK, func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusOK) // an interrupt's answer
			_, _ = w.Write([]byte(`{"interrupted":false}`))
		}},
		{"write alone", http.StatusOK, func(w http.ResponseWriter) { _, _ = w.Write([]byte("{}")) }},
		{"flush", http.StatusOK, func(w http.ResponseWriter) { w.(http.Flusher).Flush() }}, // an event stream's first act
		{"nothing", http.StatusOK, func(w http.ResponseWriter) {}},                         // net/http's implicit 200 as the handler returns
	}
	bodies := map[string]string{
		"declared":        "Content-Length: 50\r\n\r\nx",
		"chunked unended": "Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n",
	}
	for _, a := range answers {
		for name, body := range bodies {
			t.Run(a.name+"/"+name, func(t *testing.T) {
				t.Parallel() // a failure waits out serveLoopback's guard
				c := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					a.answer(w) // the body is never read
				}))
				_, err := c.Write([]byte("POST /v1/sessions/nosuch/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\n" + body))
				require.NoError(t, err)
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				require.NoError(t, err, "no answer while the body is incomplete")
				_, err = io.Copy(io.Discard, resp.Body)
				require.NoError(t, err)
				assert.Equal(t, a.status, resp.StatusCode)
				assert.True(t, resp.Close, "Connection: close: the rest of the body may still come")
				// The server closes it once the grace is up, not at its read
				// timeout (an hour here; the 30 s guard fails the test first).
				_, err = br.ReadByte()
				assert.ErrorIs(t, err, io.EOF, "the server closed the connection")
			})
		}
	}
}

// A body read to its end keeps the connection for the next request, and
// the handler sees the body the client sent.
func TestReadBodyKeepsTheConnection(t *testing.T) {
	c := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	}))
	br := bufio.NewReader(c)
	for _, body := range []string{"first", "second"} {
		_, err := c.Write([]byte("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + map[string]string{"first": "5", "second": "6"}[body] + "\r\n\r\n" + body))
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, body, string(got))
		assert.False(t, resp.Close, "a body read to its end keeps the connection")
	}
}

// A handler that reads its body to the end and writes nothing (net/http's
// implicit 200 as it returns) keeps the connection too: closeUnread marks
// the implicit answer only when the body had not ended.
func TestReadBodyAnsweredByNothingKeepsTheConnection(t *testing.T) {
	read := make(chan string, 2)
	c := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		read <- string(b)
	}))
	br := bufio.NewReader(c)
	for _, body := range []string{"first", "second"} {
		_, err := c.Write([]byte("POST /v1/sessions/s/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body))
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, body, <-read)
		require.False(t, resp.Close, "a body read to its end keeps the connection, with nothing written")
	}
}
