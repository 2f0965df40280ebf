package runner_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// receiver is a webhook endpoint on loopback that records what it got.
type receiver struct {
	mu    sync.Mutex
	keys  []string
	valid []bool
}

func (rc *receiver) handler(secret string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.keys = append(rc.keys, r.Header.Get(web.IdempotencyKeyHeader))
		rc.valid = append(rc.valid, web.Verify([]byte(secret), r.Header, body, time.Now()) == nil)
		rc.mu.Unlock()
		w.Write([]byte("ok"))
	}
}

func (rc *receiver) calls() ([]string, []bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.keys...), append([]bool(nil), rc.valid...)
}

// webhookTurn runs a one-call turn against a webhook tool and kills the
// instance right after the call's `executing` commit, before its body runs.
func webhookTurn(t *testing.T, idempotent bool) (*treetest.Tree, *receiver, string) {
	const secret = "a-very-secret-webhook-key"
	rc := &receiver{}
	srv := httptest.NewServer(rc.handler(secret))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, _ := strconv.Atoi(u.Port())
	policy := webnet.Dialing(web.NewEgress()).WithPorts(port).WithAllowCIDRs(netip.MustParsePrefix("127.0.0.1/32"))
	hook, err := web.NewWebhook(web.WebhookSpec{Name: "notify", Permission: "allow", URL: srv.URL, Idempotent: idempotent, Secret: web.NewSecret(secret)}, policy)
	require.NoError(t, err)

	tr := treetest.New(t)
	m := &scriptModel{steps: func(k int) scriptStep {
		if k == 1 {
			return scriptStep{chunks: toolCall("notify", `{"msg":"hi"}`)}
		}
		return scriptStep{chunks: text("sent")}
	}}
	n := tr.Boot(newRunner(t, m, runner.NewConfig(), hook))
	sid := n.NewSession("s")
	// Commits: admission, start, step.started, step.completed, executing.
	n.Kill.KillAt(5, true)
	n.Admit(sid, "notify them")
	<-n.Kill.Died()
	n.Crash()
	require.Len(t, treetest.OfType(tr.Events(sid), event.ToolExecuting), 1, "killed right after executing")

	n2 := tr.Boot(newRunner(t, m, runner.NewConfig(), hook))
	n2.Idle()
	require.Len(t, treetest.Terminals(tr.Events(sid)), 1)
	return tr, rc, sid
}

// A non-idempotent webhook caught in `executing` is not called again: the
// model is told the outcome is unknown.
func TestNonIdempotentWebhookNotCalledAgainAfterKill(t *testing.T) {
	tr, rc, sid := webhookTurn(t, false)
	keys, _ := rc.calls()
	assert.Empty(t, keys, "the body never ran before the kill, and is not run after it")
	settled := treetest.OfType(tr.Events(sid), event.ToolSettled)
	require.Len(t, settled, 1)
	var s event.Settled
	require.NoError(t, settled[0].Decode(&s))
	assert.Equal(t, event.OutcomeInterrupted, s.Outcome)
	assert.Equal(t, runner.UnknownOutcome, s.Output)
}

// An idempotent webhook is called again after the kill with the same
// Idempotency-Key it was given before, and a valid signature.
func TestIdempotentWebhookKeyStableAcrossKill(t *testing.T) {
	tr, rc, sid := webhookTurn(t, true)
	keys, valid := rc.calls()
	require.Len(t, keys, 1)
	assert.Equal(t, []bool{true}, valid, "signature verifies")
	executing := treetest.OfType(tr.Events(sid), event.ToolExecuting)
	var e event.Executing
	require.NoError(t, executing[0].Decode(&e))
	assert.Equal(t, e.IdempotencyKey, keys[0], "the key recorded before the kill is the key sent after it")
	assert.Equal(t, "succeeded", tr.PromptState(promptID(t, tr, sid)))
}
