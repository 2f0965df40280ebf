package web_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/tools/web"
)

// hangUpOnReuse is a receiver that answers the first request, then reads
// the second if it comes on the same (reused) connection and closes that
// connection without answering, as a server restarting or timing out an
// idle connection might after it acted on the request. Later requests,
// on new connections, are answered.
func hangUpOnReuse(t *testing.T) *testServer {
	var mu sync.Mutex
	first := ""
	hungUp := false
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hangUp := !hungUp && first == r.RemoteAddr
		if first == "" {
			first = r.RemoteAddr
		}
		hungUp = hungUp || hangUp
		mu.Unlock()
		if hangUp {
			c, _, err := http.NewResponseController(w).Hijack()
			if assert.NoError(t, err) {
				_ = c.Close()
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

// TestWebhookNotIdempotentDeliveredOnce: a non-idempotent webhook whose
// second delivery goes on a reused connection that the receiver closes
// after reading it is delivered exactly once, and the call is an error
// (the runner settles it so and never sends it again): the receiver may
// have acted on it, and only an idempotent receiver may see it twice.
func TestWebhookNotIdempotentDeliveredOnce(t *testing.T) {
	srv := hangUpOnReuse(t)
	hook, err := web.NewWebhook(hookSpec(srv.URL), srv.allowing())
	require.NoError(t, err)

	out, err := hook.Execute(context.Background(), hookCall("key-1"))
	require.NoError(t, err)
	require.Equal(t, "ok", out)
	_, err = hook.Execute(context.Background(), hookCall("key-2"))
	require.Error(t, err, "the receiver hung up before answering: the outcome is a failure, not a silent resend")
	t.Log(err)

	var ids []string
	for _, r := range srv.requests() {
		ids = append(ids, r.Header.Get(web.IDHeader))
	}
	require.Equal(t, []string{"key-1", "key-2"}, ids, "each delivery reached the receiver once")
}

// TestWebhookIdempotentMayBeResent: an idempotent webhook's delivery is
// sent again on a new connection when the reused one closes unanswered
// (net/http's resend, allowed for it alone): the receiver reads it twice
// with one webhook-id, deduplicates by it, and the call succeeds.
func TestWebhookIdempotentMayBeResent(t *testing.T) {
	srv := hangUpOnReuse(t)
	spec := hookSpec(srv.URL)
	spec.Idempotent = true
	hook, err := web.NewWebhook(spec, srv.allowing())
	require.NoError(t, err)

	for _, key := range []string{"key-1", "key-2"} {
		out, err := hook.Execute(context.Background(), hookCall(key))
		require.NoError(t, err, key)
		require.Equal(t, "ok", out)
	}
	var ids []string
	for _, r := range srv.requests() {
		ids = append(ids, r.Header.Get(web.IDHeader))
	}
	require.Equal(t, []string{"key-1", "key-2", "key-2"}, ids, "the second delivery resent with its id")
}

// TestHTTPRequestPostSentOnce: http_request is not idempotent, so a POST
// whose reused connection closes unanswered is not sent again: the call
// fails, saying the request may have arrived, and the server saw it once.
func TestHTTPRequestPostSentOnce(t *testing.T) {
	srv := hangUpOnReuse(t)
	tl := web.NewHTTPRequest(srv.allowing())
	call := func(key string) (string, error) {
		c := fetchCall(t, map[string]any{"method": "POST", "url": srv.URL + "/", "body": "b"})
		c.IdempotencyKey = key
		return tl.Execute(context.Background(), c)
	}
	_, err := call("key-1")
	require.NoError(t, err)
	_, err = call("key-2")
	require.EqualError(t, err, "POST "+srv.URL+"/: the connection closed before an answer, so the request may or may not have arrived: EOF")
	require.Equal(t, []string{"b", "b"}, srv.bodies(), "each POST read once")
}
