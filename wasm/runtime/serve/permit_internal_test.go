package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/wasm/abi"
)

// TestPermitToolDefaults: with no operator rule matching, the host decides
// by the tool's default as the runner does: http_request's is allow (a
// redirect goes on), a tool's declared permission is its own (a webhook
// configured "deny" refuses), and a tool that declares none asks, which a
// running call cannot do.
func TestPermitToolDefaults(t *testing.T) {
	tr := &Tree{cfg: Config{}}
	assert.NoError(t, tr.permit(web.NewHTTPRequest(web.NewEgress()), abi.ToolCall{})("http:a.example"))

	err := tr.permit(tool.Func{Name: "hook", DefaultPermission: "deny"}, abi.ToolCall{})("x")
	require.Error(t, err)
	assert.Equal(t, `x is declined by the tool's default (deny)`, err.Error())

	err = tr.permit(tool.Func{Name: "hook"}, abi.ToolCall{})("x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `x would need approval by the tool's default (ask)`)

	tr.cfg.Boot.Permissions = []permission.Rule{{Action: "hook", Resource: "x", Decision: permission.Allow}}
	assert.NoError(t, tr.permit(tool.Func{Name: "hook"}, abi.ToolCall{})("x"), "the operator's rule overrides the default")
}

// TestPermitCallRules: the session's and saved rules a guest's call carries
// join the operator's as in process: a session deny refuses what the
// operator allows, a session or saved allow lets through what the operator
// asks about, and the operator's deny stays final.
func TestPermitCallRules(t *testing.T) {
	const name = "hook"
	rule := func(res string, d permission.Decision) permission.Rule {
		return permission.Rule{Action: name, Resource: res, Decision: d}
	}
	tr := &Tree{cfg: Config{}}
	tr.cfg.Boot.Permissions = []permission.Rule{rule("*", permission.Ask), rule("open", permission.Allow), rule("shut", permission.Deny)}
	call := abi.ToolCall{
		SessionRules: []permission.Rule{rule("open", permission.Deny), rule("s*", permission.Allow)},
		SavedRules:   permission.AlwaysRules(name, []string{"kept"}),
	}
	p := tr.permit(tool.Func{Name: name}, call)
	assert.EqualError(t, p("open"), `open is declined by a permission rule (session "open": deny)`)
	assert.NoError(t, p("some"), "the session allows what the operator asks about")
	assert.NoError(t, p("kept"), "so does a saved always rule")
	assert.EqualError(t, p("shut"), `shut is declined by a permission rule (config "shut": deny)`, "the operator's deny is final")
	assert.ErrorContains(t, p("other"), `would need approval by a permission rule (config "*": ask)`)
}
