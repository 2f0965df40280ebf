package api_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
)

// benchServer serves the API over one tree driven by the offline model at
// zero delay (it then needs no timer), with an event stream open on its
// session.
func benchServer(b *testing.B) (c *client, id string, frames *bufio.Reader) {
	reg, err := tool.NewRegistry()
	require.NoError(b, err)
	r, err := runner.New(offline.New(nil, offline.Options{}), reg, runner.NewConfig())
	require.NoError(b, err)
	f := newFixture(b, r, nil)
	c = f.client(b, "")
	id = c.create()
	resp, err := http.Get(f.srv.URL + "/v1/sessions/" + id + "/events")
	require.NoError(b, err)
	b.Cleanup(func() { resp.Body.Close() })
	return c, id, bufio.NewReader(resp.Body)
}

// nextEvent reads frames until one of the given durable type arrives,
// counting the durable frames read.
func nextEvent(b *testing.B, r *bufio.Reader, typ string) (durable int) {
	id := false
	for {
		line, err := r.ReadString('\n')
		require.NoError(b, err)
		switch {
		case strings.HasPrefix(line, "id: "):
			id = true
			durable++
		case line == "event: "+typ+"\n" && id:
			return durable
		case line == "\n":
			id = false
		}
	}
}

// BenchmarkPromptToFirstDurableEvent: POST a prompt and wait until its
// session.prompt.admitted@1 arrives on an open event stream.
func BenchmarkPromptToFirstDurableEvent(b *testing.B) {
	c, id, frames := benchServer(b)
	for b.Loop() {
		require.Equal(b, 202, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hi"}`, nil))
		nextEvent(b, frames, "session.prompt.admitted@1")
		b.StopTimer()
		nextEvent(b, frames, "session.execution.succeeded@1") // let the turn end untimed
		b.StartTimer()
	}
}

// BenchmarkDurableEventsThroughAPI: whole one-step turns through the API,
// reported as durable events per second seen by a stream client.
func BenchmarkDurableEventsThroughAPI(b *testing.B) {
	c, id, frames := benchServer(b)
	events := 0
	start := time.Now()
	for b.Loop() {
		require.Equal(b, 202, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"one two three four five"}`, nil))
		events += nextEvent(b, frames, "session.execution.succeeded@1")
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/turn")
}

// BenchmarkSnapshotInProcess: GET /v1/sessions/{id} through the composed
// handler in process (auth, owner lookup, the tree's instance, snapshot),
// without a network: the handler's own cost per read.
func BenchmarkSnapshotInProcess(b *testing.B) {
	reg, err := tool.NewRegistry()
	require.NoError(b, err)
	r, err := runner.New(offline.New(nil, offline.Options{}), reg, runner.NewConfig())
	require.NoError(b, err)
	f := newFixture(b, r, nil)
	id := f.client(b, "").create()
	req := httptest.NewRequest("GET", "/v1/sessions/"+id, nil)
	for b.Loop() {
		w := httptest.NewRecorder()
		nethttp.Handler(f.h).ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("snapshot: %d %s", w.Code, w.Body)
		}
	}
}
