package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProvider is an OpenAI-compatible chat completions endpoint on
// loopback. Its first request is answered 429 with Retry-After: 1; after
// that a request whose last message is a tool result gets a text answer,
// and any other gets a kv_put tool call, streamed in pieces.
type fakeProvider struct {
	mu       sync.Mutex
	requests int
	keys     []string // Authorization headers seen
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests++
	n := f.requests
	f.keys = append(f.keys, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if n == 1 {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"message":"rate limited, slow down"}}`, http.StatusTooManyRequests)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(chunk string) { fmt.Fprintf(w, "data: %s\n\n", chunk) }
	if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
		for _, word := range []string{"Stored ", "it."} {
			send(`{"choices":[{"index":0,"delta":{"content":` + quote(word) + `}}]}`)
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	} else {
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"kv_put","arguments":"{\"key\":\"city\","}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"value\":\"Lisbon\"}"}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
	}
	send(`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3}}`)
	send("[DONE]")
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// The local server with OPENAI_BASE_URL pointed at a fake provider: a turn
// with a tool call completes, and a SIGKILL during the durable retry sleep
// loses nothing: after the restart the retry happens no earlier than the
// recorded time and no resume attempt is counted.
func TestProviderTurnWithToolCallSurvivesKillDuringRetrySleep(t *testing.T) {
	eachMode(t, testProviderTurnWithToolCallSurvivesKillDuringRetrySleep)
}

func testProviderTurnWithToolCallSurvivesKillDuringRetrySleep(t *testing.T) {
	fake := &fakeProvider{}
	provider := httptest.NewServer(fake)
	defer provider.Close()
	const key = "sk-test-never-logged"
	s := startWith(t, t.TempDir(), "OPENAI_BASE_URL="+provider.URL+"/v1", "OPENAI_API_KEY="+key, "REVENANT_MODEL=fake-model")
	sid := s.create()
	st := s.follow(sid, 0)
	pid := s.prompt(sid, "Remember that I live in Lisbon.")
	retry := st.until("the retry to be scheduled", isType("session.retry.scheduled@1"))
	st.close()
	s.kill() // during the retry sleep

	s = s.restart()
	sum := s.settle(sid, pid)
	sum.requireEnd(t, pid, typeSucceeded, "")
	log := s.readLog(sid, s.snapshot(sid).Cursor)
	var retryAt int64
	require.NoError(t, json.Unmarshal(retry.Data, &struct {
		At *int64 `json:"at"`
	}{&retryAt}))
	var settled, answer string
	for _, e := range log {
		switch {
		case e.Type == typeResumed && e.P.PromptID == pid:
			t.Errorf("a resume was counted for the retry: %s", e)
		case e.Type == typeStarted && e.P.PromptID == pid && e.P.Cause == "retry":
			assert.GreaterOrEqual(t, e.At, retryAt, "retried no earlier than recorded")
		case e.Type == typeToolSettled && settled == "":
			var p struct{ Output string }
			require.NoError(t, json.Unmarshal(e.Data, &p))
			settled = p.Output
		case e.Type == typeStepDone && e.P.Text != "":
			answer = e.P.Text
		}
	}
	assert.Equal(t, "stored city", settled, "the kv_put tool ran")
	assert.Equal(t, "Stored it.", answer)
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, h := range fake.keys {
		assert.Equal(t, "Bearer "+key, h)
	}
	assert.NotContains(t, s.logs.String(), key, "the key never reaches the logs")
	for _, e := range log {
		assert.NotContains(t, string(e.Data), key, "the key never reaches the event log")
	}
	assert.True(t, strings.Contains(s.logs.String(), "provider="+provider.URL+"/v1"), "the server says which provider it uses")
}
