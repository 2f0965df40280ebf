package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/redirecthost"

	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/runtime/serve"
)

// scriptedProvider is an OpenAI-compatible provider that answers its n-th
// request with a call of http_request to urls[n] (text where urls[n] is
// empty), then with text.
func scriptedProvider(t *testing.T, urls []string) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	n := 0
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		k := n
		n++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if k < len(urls) && urls[k] != "" {
			args := mustJSON(map[string]string{"url": urls[k]})
			call := map[string]any{"index": 0, "id": fmt.Sprintf("c%d", k), "type": "function",
				"function": map[string]any{"name": web.HTTPRequestName, "arguments": args}}
			fmt.Fprintf(w, "data: %s\n\n", mustJSON(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{call}}}}}))
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		fmt.Fprintf(w, "data: %s\n\n", mustJSON(map[string]any{"choices": []any{map[string]any{"delta": map[string]any{"content": "done"}}}}))
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(p.Close)
	return p
}

// settlements reads the session's event stream until the execution
// succeeded and returns its tool settlements in order.
func settlements(t *testing.T, srv *httptest.Server) []redirecthost.Settled {
	t.Helper()
	return settlementsUntil(t, srv, 1)
}

// settlementsUntil is settlements until the succeeded-th execution
// succeeded.
func settlementsUntil(t *testing.T, srv *httptest.Server, succeeded int) []redirecthost.Settled {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp := openEvents(ctx, t, srv)
	defer resp.Body.Close()
	var out []redirecthost.Settled
	var name string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
			if name == "session.execution.succeeded@1" {
				if succeeded--; succeeded == 0 {
					return out
				}
			}
			require.NotEqual(t, "session.execution.failed@1", name)
			continue
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && name == "session.tool.settled@1" {
			var env struct{ Data redirecthost.Settled }
			require.NoError(t, json.Unmarshal([]byte(v), &env), v)
			out = append(out, env.Data)
		}
	}
	t.Fatalf("stream ended before the execution succeeded (%v)", sc.Err())
	return nil
}

// TestGuestRedirectObeysOperatorPermissions is the review's repro in guest
// mode: the operator denies http_request everywhere but 127.0.0.2 and
// 127.0.0.4, and the egress policy allows 127.0.0.2 to .5. The guest's
// runner allows a GET to 127.0.0.2; its redirect to 127.0.0.3 is refused
// by the host, naming the host and the rule, and 127.0.0.3 sees nothing;
// a redirect to 127.0.0.4 is followed; one to 127.0.0.5, which the rules
// ask about, is refused (a running call cannot ask).
func TestGuestRedirectObeysOperatorPermissions(t *testing.T) {
	cast := redirecthost.NewCast(t)
	policy := webnet.Dialing(web.NewEgress()).WithPorts(cast.Ports()...).WithAllowCIDRs(cast.CIDRs()...)
	tools := []tool.Tool{web.NewHTTPRequest(policy)}
	provider := scriptedProvider(t, cast.URLs())

	srv := startTree(t, serve.Config{
		Boot: runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: provider.URL + "/v1", Name: "m"},
			Tools: serve.Declare(tools),
			Permissions: []permission.Rule{
				{Action: web.HTTPRequestName, Resource: "*", Decision: permission.Deny},
				{Action: web.HTTPRequestName, Resource: "http:127.0.0.2", Decision: permission.Allow},
				{Action: web.HTTPRequestName, Resource: "http:127.0.0.4", Decision: permission.Allow},
				{Action: web.HTTPRequestName, Resource: "http:127.0.0.5", Decision: permission.Ask},
			}},
		Tools: tools,
	})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{}`).StatusCode)
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"fetch them"}`).StatusCode)

	s := settlements(t, srv)
	require.Len(t, s, 3)
	cast.Check(t, s)
}

// guestFetching starts a guest tree whose model fetches urls in turn with
// http_request, under the operator's rules, the egress policy allowing
// the cast, and creates its session with config (the create body's).
func guestFetching(t *testing.T, cast redirecthost.Cast, operator []permission.Rule, config string, urls []string) (*httptest.Server, *watched) {
	t.Helper()
	policy := webnet.Dialing(web.NewEgress()).WithPorts(cast.Ports()...).WithAllowCIDRs(cast.CIDRs()...)
	tools := []tool.Tool{web.NewHTTPRequest(policy)}
	provider := scriptedProvider(t, urls)
	srv, w := startTreeWatched(t, serve.Config{
		Boot: runtime.BootConfig{Model: abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: provider.URL + "/v1", Name: "m"},
			Tools: serve.Declare(tools), Permissions: operator},
		Tools: tools,
	})
	require.Equal(t, 201, post(t, srv.URL+"/v1/sessions", `{"config":`+config+`}`).StatusCode)
	return srv, w
}

func httpRule(resource string, d permission.Decision) permission.Rule {
	return permission.Rule{Action: web.HTTPRequestName, Resource: resource, Decision: d}
}

// TestGuestRedirectObeysSessionPermissions: a redirect a guest's call
// reaches is decided by the session's own rules as in process, not only
// by the operator's. A session rule that denies 127.0.0.3 refuses the
// redirect there, naming the rule, and 127.0.0.3 sees nothing, though the
// operator allows it.
func TestGuestRedirectObeysSessionPermissions(t *testing.T) {
	cast := redirecthost.NewCast(t)
	srv, _ := guestFetching(t, cast, nil, `{"permissions":[{"action":"http_request","resource":"http:127.0.0.3","decision":"deny"}]}`, cast.URLs()[:2])
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"fetch them"}`).StatusCode)

	s := settlements(t, srv)
	require.Len(t, s, 2)
	assert.Equal(t, "error", s[0].Outcome)
	assert.Contains(t, s[0].Output, `redirect not permitted: http:127.0.0.3 is declined by a permission rule (session "http:127.0.0.3": deny)`)
	assert.Equal(t, "ok", s[1].Outcome, s[1].Output)
	assert.Contains(t, s[1].Output, "reached 127.0.0.4")
	assert.Empty(t, cast.Denied.Paths(), "nothing reached the host the session denies")
	assert.Equal(t, []string{"/to-denied", "/to-allowed"}, cast.First.Paths())
}

// TestGuestRedirectSessionAllowsWhereOperatorAsks: the operator asks about
// every host but 127.0.0.2 and denies 127.0.0.3; the session allows every
// host. The redirect to 127.0.0.4, which only the session allows, is
// followed; the one to 127.0.0.3 is still refused by the operator's deny,
// which no session rule lifts.
func TestGuestRedirectSessionAllowsWhereOperatorAsks(t *testing.T) {
	cast := redirecthost.NewCast(t)
	operator := []permission.Rule{httpRule("*", permission.Ask), httpRule("http:127.0.0.2", permission.Allow), httpRule("http:127.0.0.3", permission.Deny)}
	srv, _ := guestFetching(t, cast, operator, `{"permissions":[{"action":"http_request","resource":"http:*","decision":"allow"}]}`, cast.URLs()[:2])
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"fetch them"}`).StatusCode)

	s := settlements(t, srv)
	require.Len(t, s, 2)
	assert.Equal(t, "error", s[0].Outcome)
	assert.Contains(t, s[0].Output, `redirect not permitted: http:127.0.0.3 is declined by a permission rule (config "http:127.0.0.3": deny)`)
	assert.Equal(t, "ok", s[1].Outcome, s[1].Output)
	assert.Contains(t, s[1].Output, "reached 127.0.0.4")
	assert.Empty(t, cast.Denied.Paths())
	assert.Equal(t, []string{"/open"}, cast.Allowed.Paths())
}

// TestGuestRedirectFollowsSavedAlwaysRule: the operator asks about every
// host but 127.0.0.2. A direct call to 127.0.0.4 asks, and an always reply
// saves its rule in the guest's database. The guest then dies; the fresh
// guest the next prompt boots reads the saved rule and sends it with its
// call, so that call's redirect to 127.0.0.4 is followed, as in process,
// where without the saved rule the host would refuse it (a running call
// cannot ask).
func TestGuestRedirectFollowsSavedAlwaysRule(t *testing.T) {
	cast := redirecthost.NewCast(t)
	operator := []permission.Rule{httpRule("*", permission.Ask), httpRule("http:127.0.0.2", permission.Allow)}
	srv, w := guestFetching(t, cast, operator, `{}`, []string{cast.Allowed.URL + "/direct", "", cast.URLs()[1]})
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"fetch it"}`).StatusCode)
	waitFor(t, srv, "session.step.parked@1")

	var asked struct {
		Permissions []struct{ ID string } `json:"permissions"`
	}
	resp := get(t, srv.URL+"/v1/sessions/tree1/permissions")
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&asked))
	require.Len(t, asked.Permissions, 1)
	reply := post(t, srv.URL+"/v1/sessions/tree1/permissions/"+asked.Permissions[0].ID, `{"reply":"always","response_id":"r1"}`)
	require.Equal(t, 200, reply.StatusCode)
	s := settlements(t, srv)
	require.Len(t, s, 1)
	assert.Equal(t, "ok", s[0].Outcome, s[0].Output)

	w.quiet(t)
	require.NoError(t, serve.Guest(w.tree).Close(context.Background()), "the guest dies")
	require.Equal(t, 202, post(t, srv.URL+"/v1/sessions/tree1/prompt", `{"text":"fetch the next"}`).StatusCode)
	s = settlementsUntil(t, srv, 2)
	require.Len(t, s, 2)
	assert.Equal(t, "ok", s[1].Outcome, "the saved rule lets the redirect through: %s", s[1].Output)
	assert.Contains(t, s[1].Output, "reached 127.0.0.4")
	assert.Equal(t, []string{"/direct", "/open"}, cast.Allowed.Paths())
	assert.Equal(t, 2, serve.Generation(w.tree), "a fresh guest ran the second call")
}
