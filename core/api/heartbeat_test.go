package api_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/treetest"
)

// An idle event stream is sent a ":" comment every heartbeat interval, for
// as long as it stays open, not once: the proxies in front of a stream
// (and the client's own idle timeout) end a stream silent for long, so
// every interval needs its comment.
func TestIdleStreamIsSentAHeartbeatEveryInterval(t *testing.T) {
	const beat = time.Second
	f := newFixtureWith(t, treetest.NewDriver(1), nil, api.NewConfig().WithHeartbeat(beat))
	id := f.client(t, "").create()
	resp, err := f.srv.Client().Get(f.srv.URL + "/v1/sessions/" + id + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string)
	go func() {
		defer close(lines)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	nextComment := func() {
		t.Helper()
		for line := range lines {
			if line == ":" {
				return
			}
		}
		t.Fatal("the stream ended before its heartbeat")
	}
	for i := range 3 {
		armed := make(chan struct{})
		go func() { f.clock.BlockUntil(1); close(armed) }()
		select {
		case <-armed:
		case <-time.After(followLimit): // only to fail instead of hanging
			t.Fatalf("no heartbeat timer is set after %d heartbeats", i)
		}
		f.clock.Advance(beat)
		nextComment()
	}
}
