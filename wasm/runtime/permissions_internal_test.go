package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/wasm/abi"
)

// A guest older than 1.4 would not receive the permission configuration:
// the host refuses to boot it with rules or a denied tool, and boots it
// without (a tool set to allow only asks there).
func TestOlderGuestRefusedWithPermissions(t *testing.T) {
	old := uint16(abi.MinorPermissions - 1)
	rules := BootConfig{Permissions: []permission.Rule{{Action: "t", Resource: "*", Decision: permission.Deny}}}
	require.ErrorContains(t, checkPermissionsFit(rules, old), "does not carry permission rules")
	deny := BootConfig{Tools: []abi.ToolDecl{{Name: "deploy", Permission: "deny"}}}
	require.ErrorContains(t, checkPermissionsFit(deny, old), "does not carry tool deploy's deny")
	require.NoError(t, checkPermissionsFit(BootConfig{Tools: []abi.ToolDecl{{Name: "hook", Permission: "allow"}}}, old))
	require.NoError(t, checkPermissionsFit(rules, abi.MinorPermissions))
	require.NoError(t, checkPermissionsFit(deny, abi.MinorPermissions))
}
