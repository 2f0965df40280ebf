package runner_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/redirecthost"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// TestHTTPRequestRedirectObeysPermissionRules: the operator denies
// http_request everywhere but 127.0.0.2 and 127.0.0.4, all three allowed by
// the egress policy. A GET to 127.0.0.3 is declined before it runs; a GET
// to 127.0.0.2 that redirects to 127.0.0.3 is refused at the redirect,
// naming the host and the rule, and 127.0.0.3 sees nothing; one that
// redirects to 127.0.0.4 is followed; one that redirects to 127.0.0.5,
// which the rules ask about, is refused too (a running call cannot ask).
func TestHTTPRequestRedirectObeysPermissionRules(t *testing.T) {
	cast := redirecthost.NewCast(t)
	policy := webnet.Dialing(web.NewEgress()).WithPorts(cast.Ports()...).WithAllowCIDRs(cast.CIDRs()...)
	cfg := runner.NewConfig().WithPermissions([]permission.Rule{
		{Action: web.HTTPRequestName, Resource: "*", Decision: permission.Deny},
		{Action: web.HTTPRequestName, Resource: "http:127.0.0.2", Decision: permission.Allow},
		{Action: web.HTTPRequestName, Resource: "http:127.0.0.4", Decision: permission.Allow},
		{Action: web.HTTPRequestName, Resource: "http:127.0.0.5", Decision: permission.Ask},
	})
	urls := append([]string{cast.Denied.URL + "/direct"}, cast.URLs()...)
	m := &scriptModel{steps: func(k int) scriptStep {
		if k <= len(urls) {
			return scriptStep{chunks: toolCall(web.HTTPRequestName, fmt.Sprintf(`{"url":%q}`, urls[k-1]))}
		}
		return scriptStep{chunks: text("done")}
	}}
	tr := treetest.New(t)
	n := tr.Boot(newRunner(t, m, cfg, web.NewHTTPRequest(policy)))
	sid := n.NewSession("s")
	n.Admit(sid, "fetch them")
	n.Idle()

	s := settlements(t, tr.Events(sid))
	require.Len(t, s, 4)
	assert.Equal(t, event.OutcomeDeclined, s[0].Outcome, "a direct request to the denied host does not run")
	var redirected []redirecthost.Settled
	for _, x := range s[1:] {
		redirected = append(redirected, redirecthost.Settled{Outcome: x.Outcome, Output: x.Output})
	}
	cast.Check(t, redirected)
}
