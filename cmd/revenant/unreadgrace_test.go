package main

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request answered before its body ended gets unreadGrace to go on
// reading it: what the client already sent, more than net/http's buffer
// holds, is read before the connection closes, so the close is a clean
// end of the answer, not a reset that can take the answer with it (a
// socket closed with unread input resets the connection). A client that
// then sends the rest of its body also ends cleanly.
func TestAnswerUnreadBodyClosesCleanly(t *testing.T) {
	const declared, sentFirst = 200 << 10, 64 << 10 // net/http drains up to 256 KiB
	for name, sendRest := range map[string]bool{"rest never sent": false, "rest sent after the answer": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a failure waits out serveLoopback's guard
			c := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotFound) // the body is never read
			}))
			head := "POST /v1/sessions/nosuch/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + strconv.Itoa(declared) + "\r\n\r\n"
			_, err := c.Write([]byte(head + strings.Repeat("x", sentFirst)))
			require.NoError(t, err)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			assert.Equal(t, http.StatusNotFound, resp.StatusCode)
			if sendRest {
				_, err = c.Write([]byte(strings.Repeat("x", declared-sentFirst)))
				require.NoError(t, err)
			}
			_, err = br.ReadByte()
			assert.ErrorIs(t, err, io.EOF, "the server ended the connection cleanly")
		})
	}
}
