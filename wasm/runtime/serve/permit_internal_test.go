package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
)

// TestPermitToolDefaults: with no operator rule matching, the host decides
// by the tool's default as the runner does: http_request's is allow (a
// redirect goes on), a tool's declared permission is its own (a webhook
// configured "deny" refuses), and a tool that declares none asks, which a
// running call cannot do.
func TestPermitToolDefaults(t *testing.T) {
	tr := &Tree{cfg: Config{}}
	assert.NoError(t, tr.permit(web.NewHTTPRequest(web.NewEgress()))("http:a.example"))

	err := tr.permit(tool.Func{Name: "hook", DefaultPermission: "deny"})("x")
	require.Error(t, err)
	assert.Equal(t, `x is declined by the tool's default (deny)`, err.Error())

	err = tr.permit(tool.Func{Name: "hook"})("x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `x would need approval by the tool's default (ask)`)

	tr.cfg.Boot.Permissions = []permission.Rule{{Action: "hook", Resource: "x", Decision: permission.Allow}}
	assert.NoError(t, tr.permit(tool.Func{Name: "hook"})("x"), "the operator's rule overrides the default")
}
