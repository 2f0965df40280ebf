package serve_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// An event stream's head reaches its client at once, as in process, even
// when the stream has nothing to send yet: a client that follows a session
// from its snapshot's cursor (after=cursor, nothing new) learns that its
// stream is open (an EventSource's open event) without waiting for the
// first heartbeat. The heartbeat is set far away, so only the head's own
// flush can answer before the client's deadline.
func TestServeStreamHeadSentBeforeAnyEvent(t *testing.T) {
	boot := offline()
	boot.Settings.Heartbeat = time.Hour
	srv := startTree(t, serve.Config{Boot: boot})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/sessions/tree1/events?after=1", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "the stream's head never came (the session has one event, so there is nothing to send after 1)")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
}
