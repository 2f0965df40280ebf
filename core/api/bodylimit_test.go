package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A declared Content-Length over max_body is refused 413 at once, unread,
// on a create and on a tree's route, as the Cloudflare front refuses it:
// the client here declares far more than it sends, so a server that read
// the body would wait for bytes that never come.
func TestDeclaredLengthOverTheCapIs413Unread(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(4), nil) // max_body 4096
	id := f.client(t, "").create()
	// Compressed or not: the declared length is judged before the
	// encoding, as the guest's host and the Cloudflare front judge it
	// (probe 63 found a gzip one 400 here, 413 there).
	for _, rq := range []struct{ path, extra string }{
		{"/v1/sessions", ""}, {"/v1/sessions/" + id + "/prompt", ""},
		{"/v1/sessions", "Content-Encoding: gzip\r\n"}, {"/v1/sessions/" + id + "/prompt", "Content-Encoding: gzip\r\n"},
	} {
		path := rq.path
		conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
		require.NoError(t, err)
		// Closed before the server (cleanups run last first), even when a
		// check below fails: the server's Close waits for this connection.
		t.Cleanup(func() { conn.Close() })
		// A bound on a wrong answer's wait (the server would read until the
		// client closes), not a wait for the right one.
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: 2000000\r\n\r\n{}", path, rq.extra)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%s %q", path, rq.extra)
		var body strings.Builder
		_, err = bufio.NewReader(resp.Body).WriteTo(&body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s %q", path, rq.extra)
		assert.Contains(t, body.String(), string(api.ErrPayloadTooLarge), "%s %q", path, rq.extra)
		assert.Contains(t, body.String(), "the request body is larger than 4096 bytes", path)
	}
	assert.Len(t, f.trees.trees, 1, "the refused create made no tree")
}

// max_body is the largest body taken: a prompt whose body, declared in
// Content-Length, is exactly max_body bytes is admitted; a byte more is
// 413.
func TestBodyOfExactlyTheCapIsTaken(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(4), nil) // max_body 4096
	c := f.client(t, "")
	id := c.create()
	body := func(n int) string {
		const frame = `{"text":""}`
		return `{"text":"` + strings.Repeat("a", n-len(frame)) + `"}`
	}
	require.Len(t, body(4096), 4096)
	assert.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", body(4096), nil), "a body of exactly max_body")
	assert.Equal(t, http.StatusRequestEntityTooLarge, c.do("POST", "/v1/sessions/"+id+"/prompt", body(4097), nil), "a byte more")

	// The same without a declared length (sent chunked): the cap is on
	// what is read, not only on what is declared.
	chunked := func(b string) int {
		req, err := http.NewRequest("POST", f.srv.URL+"/v1/sessions/"+id+"/prompt", io.NopCloser(strings.NewReader(b)))
		require.NoError(t, err)
		req.ContentLength = -1 // unknown: the client sends it chunked
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusAccepted, chunked(body(4096)), "max_body, chunked")
	assert.Equal(t, http.StatusRequestEntityTooLarge, chunked(body(4097)), "a byte more, chunked")
}

// A prompt's own bounds, judged by the decoder whatever the server's body
// cap: its text up to MaxPromptText bytes (payload_too_large past it), its
// id up to MaxPromptIDLen (invalid_request past it).
func TestDecodePromptLimits(t *testing.T) {
	prompt := func(text, id string) []byte { return []byte(`{"text":"` + text + `","id":"` + id + `"}`) }
	_, err := api.DecodePrompt(prompt(strings.Repeat("a", api.MaxPromptText), strings.Repeat("i", api.MaxPromptIDLen)))
	require.NoError(t, err)
	_, err = api.DecodePrompt(prompt(strings.Repeat("a", api.MaxPromptText+1), "x"))
	assert.ErrorIs(t, err, api.ErrPayloadTooLarge)
	_, err = api.DecodePrompt(prompt("a", strings.Repeat("i", api.MaxPromptIDLen+1)))
	assert.ErrorIs(t, err, api.ErrInvalidRequest)
}

// A prompt of whitespace only is refused by the decoder, before the
// instance is asked, with the message that names the field (core's own
// refusal would say "admit prompt: empty text").
func TestBlankPromptRefusedByTheDecoder(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(1), nil)
	c := f.client(t, "")
	id := c.create()
	for _, text := range []string{"", " ", " \n\t "} {
		var e api.ErrorBody
		require.Equal(t, http.StatusBadRequest, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"`+strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(text)+`"}`, &e), "%q", text)
		assert.Equal(t, api.ErrInvalidRequest, e.Error.Type, "%q", text)
		assert.Equal(t, "text must not be empty", e.Error.Message, "%q", text)
	}
}

// A body sent compressed is refused unread, saying why (read as it comes
// it would be "not valid UTF-8"), on a create and on a tree's route; an
// identity encoding is no encoding.
func TestCompressedBodyRefusedSayingSo(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(4), nil)
	c := f.client(t, "")
	id := c.create()
	send := func(path, encoding, body string) (int, string) {
		req, err := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Encoding", encoding)
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}
	for _, path := range []string{"/v1/sessions", "/v1/sessions/" + id + "/prompt"} {
		status, body := send(path, "gzip", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
		assert.Equal(t, http.StatusBadRequest, status, path)
		assert.Contains(t, body, string(api.ErrInvalidRequest), path)
		assert.Contains(t, body, "Content-Encoding", path)
	}
	status, _ := send("/v1/sessions/"+id+"/prompt", "Identity", `{"text":"hi"}`)
	assert.Equal(t, http.StatusAccepted, status)
	assert.Len(t, f.trees.trees, 1, "the refused create made no tree")
}

// Two Content-Encoding headers are one list of codings (RFC 9110 §5.3), as
// the Cloudflare front sees them: identity then gzip is a compressed body,
// refused as "identity, gzip" in one header is. Probe 63 found the second
// header ignored here (202), where the front refused the joined list.
func TestCompressedBodyInASecondHeaderRefused(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(4), nil)
	c := f.client(t, "")
	id := c.create()
	for _, values := range [][]string{{"identity", "gzip"}, {"identity, gzip"}, {"gzip", "identity"}} {
		req, err := http.NewRequest("POST", f.srv.URL+"/v1/sessions/"+id+"/prompt", strings.NewReader(`{"text":"hi"}`))
		require.NoError(t, err)
		req.Header["Content-Encoding"] = values
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q: %s", values, raw)
		assert.Contains(t, string(raw), "Content-Encoding", "%q", values)
	}
	req, err := http.NewRequest("POST", f.srv.URL+"/v1/sessions/"+id+"/prompt", strings.NewReader(`{"text":"hi"}`))
	require.NoError(t, err)
	req.Header["Content-Encoding"] = []string{"identity", " Identity ,identity"}
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode, "identity alone, however often, is no encoding")
}
