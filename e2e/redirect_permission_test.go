package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/redirecthost"
)

// fetchingProvider is an OpenAI-compatible provider that calls
// http_request on urls in turn: a request with k tool results gets a call
// to urls[k], and text once every URL was fetched.
func fetchingProvider(urls []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		k := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				k++
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(chunk string) { fmt.Fprintf(w, "data: %s\n\n", chunk) }
		if k < len(urls) {
			args := quote(fmt.Sprintf(`{"url":%q}`, urls[k]))
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"http_request","arguments":%s}}]}}]}`, k, args))
			send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		} else {
			send(`{"choices":[{"index":0,"delta":{"content":"done"}}]}`)
			send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		}
		send("[DONE]")
	}
}

// TestRedirectObeysOperatorPermissions is the review's repro on the local
// server, in process and with trees as WebAssembly guests: the operator's
// permissions deny http_request everywhere but 127.0.0.2 and 127.0.0.4,
// and the egress policy allows 127.0.0.2 to .4. A GET to 127.0.0.2 that
// redirects to 127.0.0.3 is refused at the redirect, naming the rule, and
// 127.0.0.3 sees nothing; one that redirects to 127.0.0.4 is followed.
func TestRedirectObeysOperatorPermissions(t *testing.T) {
	eachMode(t, testRedirectObeysOperatorPermissions)
}

func testRedirectObeysOperatorPermissions(t *testing.T) {
	cast := redirecthost.NewCast(t)
	s := startRedirecting(t, cast, `
    {"action": "http_request", "resource": "*", "decision": "deny"},
    {"action": "http_request", "resource": "http:127.0.0.2", "decision": "allow"},
    {"action": "http_request", "resource": "http:127.0.0.4", "decision": "allow"}`)
	cast.Check(t, fetchBoth(t, s, s.create()))
}

// startRedirecting starts a server whose model calls http_request on
// cast's first two URLs (to Denied, to Allowed), one per step, under the
// operator's permissions (JSON rules, comma-separated) and an egress
// policy that lets the tool reach cast's three hosts.
func startRedirecting(t *testing.T, cast redirecthost.Cast, permissions string) *server {
	t.Helper()
	provider := httptest.NewServer(fetchingProvider(cast.URLs()[:2]))
	t.Cleanup(provider.Close)
	dir := t.TempDir()
	conf := fmt.Sprintf(`{
  "permissions": [%s
  ],
  "egress": {"schemes": ["http"], "ports": [%d, %d, %d], "allow_cidrs": ["127.0.0.2/32", "127.0.0.3/32", "127.0.0.4/32"]}
}`, permissions, cast.First.Port(), cast.Denied.Port(), cast.Allowed.Port())
	path := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	return startWith(t, filepath.Join(dir, "data"), "REVENANT_CONFIG="+path,
		"OPENAI_BASE_URL="+provider.URL+"/v1", "OPENAI_API_KEY=sk-test", "REVENANT_MODEL=fake-model")
}

// fetchBoth runs session sid's turn of two http_request calls to its end
// and returns the two calls' settlements, in order.
func fetchBoth(t *testing.T, s *server, sid string) []redirecthost.Settled {
	t.Helper()
	pid := s.prompt(sid, "fetch them")
	s.settle(sid, pid).requireEnd(t, pid, typeSucceeded, "")
	var got []redirecthost.Settled
	for _, e := range s.readLog(sid, s.snapshot(sid).Cursor) {
		if e.Type == typeToolSettled {
			var p redirecthost.Settled
			require.NoError(t, json.Unmarshal(e.Data, &p))
			got = append(got, p)
		}
	}
	require.Len(t, got, 2)
	return got
}

// TestRedirectObeysSessionPermissions: a session's own `permissions` (its
// create config) decide an http_request redirect in both modes alike. The
// operator asks about every host but 127.0.0.2 and 127.0.0.3, which it
// allows; the session denies 127.0.0.3 and allows 127.0.0.4. The redirect
// to 127.0.0.3 is refused, naming the session's rule, and 127.0.0.3 sees
// nothing; the one to 127.0.0.4, which only the session allows, is
// followed. With trees as WebAssembly guests the host decides the hops,
// by the rules the guest sends with the call.
func TestRedirectObeysSessionPermissions(t *testing.T) {
	eachMode(t, testRedirectObeysSessionPermissions)
}

func testRedirectObeysSessionPermissions(t *testing.T) {
	cast := redirecthost.NewCast(t)
	s := startRedirecting(t, cast, `
    {"action": "http_request", "resource": "*", "decision": "ask"},
    {"action": "http_request", "resource": "http:127.0.0.2", "decision": "allow"},
    {"action": "http_request", "resource": "http:127.0.0.3", "decision": "allow"}`)
	var created struct {
		ID string `json:"id"`
	}
	s.do("POST", "/v1/sessions", map[string]any{"config": map[string]any{"permissions": []map[string]string{
		{"action": "http_request", "resource": "http:127.0.0.3", "decision": "deny"},
		{"action": "http_request", "resource": "http:127.0.0.4", "decision": "allow"},
	}}}, http.StatusCreated, &created)
	got := fetchBoth(t, s, created.ID)
	assert.Equal(t, "error", got[0].Outcome)
	assert.Contains(t, got[0].Output, `redirect not permitted: http:127.0.0.3 is declined by a permission rule (session "http:127.0.0.3": deny)`)
	assert.Equal(t, "ok", got[1].Outcome, got[1].Output)
	assert.Contains(t, got[1].Output, "reached 127.0.0.4")
	assert.Empty(t, cast.Denied.Paths(), "nothing reached the host the session denies")
	assert.Equal(t, []string{"/open"}, cast.Allowed.Paths())
	assert.Equal(t, []string{"/to-denied", "/to-allowed"}, cast.First.Paths())
}
