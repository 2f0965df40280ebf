package host_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/host"
)

// A declared Content-Length over max_body on a tree's route that reads a
// body is 413 at once, unread, in guest mode as in process: the guest's
// host receives a body whole before the guest sees it, so it must not
// wait for one the client never sends (found by probe 61: the answer came
// only at the server's read timeout, and was 400). The body is never
// sent here; the test's deadline is a guard, not a wait. An interrupt
// ignores its body, and an unknown session is still 404 first.
func TestGuestRefusesDeclaredOverCapUnread(t *testing.T) {
	inBothModes(t, func(t *testing.T, e *env, cfg host.Config, guest bool) {
		h := e.open(cfg)
		base := apiServer(t, h, guest)
		id := create(t, base)
		declared := int64(api.DefaultMaxBody) + 1
		for _, rq := range []struct {
			path   string
			status int
		}{
			{"/v1/sessions/" + id + "/prompt", http.StatusRequestEntityTooLarge},
			{"/v1/sessions/" + id + "/questions/q-x-0", http.StatusRequestEntityTooLarge},
			{"/v1/sessions/" + id + "/permissions/p-x-0", http.StatusRequestEntityTooLarge},
			{"/v1/sessions/nosuch/prompt", http.StatusNotFound},
		} {
			status, body := heldBackAnswer(t, base, "POST", rq.path, declared, "")
			assert.Equal(t, rq.status, status, "%s: %s", rq.path, body)
			if rq.status == http.StatusRequestEntityTooLarge {
				assert.Contains(t, body, "payload_too_large")
			}
		}
	})
}

// A compressed body declared over max_body is 413, as an uncompressed one
// is, in process as under -guest and on Cloudflare: the declared length is
// judged before the encoding (docs/api.md, Body size). Found by probe 63:
// in process the encoding was checked first, so the answer was 400
// invalid_request on a create and a prompt, where -guest answered a
// prompt 413.
func TestCompressedBodyDeclaredOverCapIs413(t *testing.T) {
	inBothModes(t, func(t *testing.T, e *env, cfg host.Config, guest bool) {
		h := e.open(cfg)
		base := apiServer(t, h, guest)
		id := create(t, base)
		declared := int64(api.DefaultMaxBody) + 1
		for _, path := range []string{"/v1/sessions", "/v1/sessions/" + id + "/prompt"} {
			status, body := heldBackAnswer(t, base, "POST", path, declared, "Content-Encoding: gzip\r\n")
			assert.Equal(t, http.StatusRequestEntityTooLarge, status, "%s: %s", path, body)
			assert.Contains(t, body, "payload_too_large", path)
		}
		// Within the cap, the encoding is still refused, saying so, and
		// unread: at once with the body held back too, as in process
		// (under -guest the guest's host read it whole first, so the
		// answer came at the read timeout, 60 s, and said the body could
		// not be read; found by readme63). Declared past the 256 KiB that
		// net/http reads of an unread body before it answers (the server
		// of cmd/revenant closes such a connection instead; this test's
		// server does not), but within the cap.
		within := int64(api.DefaultMaxBody) / 2
		require.Greater(t, within, int64(256<<10))
		for _, path := range []string{"/v1/sessions", "/v1/sessions/" + id + "/prompt", "/v1/sessions/" + id + "/questions/q-x-0"} {
			status, body := heldBackAnswer(t, base, "POST", path, within, "Content-Encoding: gzip\r\n")
			assert.Equal(t, http.StatusBadRequest, status, "%s: %s", path, body)
			assert.Contains(t, body, "Content-Encoding", path)
		}
	})
}

// heldBackAnswer sends method path with a declared Content-Length of
// declared bytes and only the body's first byte, holding back the rest,
// and returns the answer's status and body. It fails the test if no
// answer comes while the body is held back (the deadline turns a hang
// into a failure; it is not a wait). extra is more header lines, each
// ending in CRLF.
func heldBackAnswer(t *testing.T, base, method, path string, declared int64, extra string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	// Closed before the test's server (cleanups run last first): a
	// handler still reading the body ends with it.
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, method+" "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-token\r\n"+
		extra+"Content-Length: "+strconv.FormatInt(declared, 10)+"\r\n\r\n{")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "%s %s: no answer while the declared body is held back", method, path)
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
