package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/guestbuild"
	"github.com/revenantrt/revenant/wasm/abi"
)

// A guest older than 1.4 would not receive the permission configuration,
// and may have no authorization at all (1.3 guests built before
// permissions run every tool unasked): the host refuses to boot it with
// rules or any tool that is not "allow" (deny, ask, or unset, which asks),
// and boots it when every tool is allow.
func TestOlderGuestRefusedWithPermissions(t *testing.T) {
	old := uint16(abi.MinorPermissions - 1)
	rules := BootConfig{Permissions: []permission.Rule{{Action: "t", Resource: "*", Decision: permission.Deny}}}
	require.ErrorContains(t, checkBootFits(rules, old), "does not carry permission rules")
	for perm, want := range map[string]string{"deny": `"deny"`, "ask": `"ask"`, "": `"ask"`} {
		cfg := BootConfig{Tools: []abi.ToolDecl{
			{Name: "fine", Permission: "allow"},
			{Name: "deploy", Permission: perm},
		}}
		err := checkBootFits(cfg, old)
		require.ErrorContains(t, err, "does not carry tool deploy's permission "+want, "permission %q", perm)
		require.ErrorIs(t, err, ErrVersion)
		require.NoError(t, checkBootFits(cfg, abi.MinorPermissions), "a 1.4 guest enforces %q itself", perm)
	}
	require.NoError(t, checkBootFits(BootConfig{Tools: []abi.ToolDecl{{Name: "hook", Permission: "allow"}}}, old))
	require.NoError(t, checkBootFits(BootConfig{}, old))
	require.NoError(t, checkBootFits(rules, abi.MinorPermissions))
}

// A guest older than 1.8 would not receive the operator's policy: a final
// rule (its ask a session's rules would lift) or an allow-list of models
// (any model would do) refuses its boot; a 1.8 guest takes both.
func TestOlderGuestRefusedWithOperatorPolicy(t *testing.T) {
	old := uint16(abi.MinorOperatorPolicy - 1)
	final := BootConfig{Permissions: []permission.Rule{{Action: "t", Resource: "*", Decision: permission.Ask, Final: true}}}
	err := checkBootFits(final, old)
	require.ErrorIs(t, err, ErrVersion)
	require.ErrorContains(t, err, "does not carry permission rule 0's final flag")
	models := BootConfig{AllowedModels: []string{"m"}}
	err = checkBootFits(models, old)
	require.ErrorIs(t, err, ErrVersion)
	require.ErrorContains(t, err, "does not carry the allowed models")
	require.NoError(t, checkBootFits(final, abi.MinorOperatorPolicy))
	require.NoError(t, checkBootFits(models, abi.MinorOperatorPolicy))
	require.NoError(t, checkBootFits(BootConfig{Permissions: []permission.Rule{{Action: "t", Resource: "*", Decision: permission.Ask}}}, old),
		"a plain rule is 1.4's")
}

// Boot itself refuses: the old guest is never called, so it stays
// unbooted and writes nothing (no migration, no epoch).
func TestOlderGuestBootRefusedBeforeCallingIt(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, guestbuild.Must(t), CompileOptions{CacheDir: guestbuild.CacheDir()})
	require.NoError(t, err)
	defer m.Close(ctx)
	conn := &countingConn{}
	g, err := m.Instantiate(ctx, Options{Conn: conn, Services: nopServices{}})
	require.NoError(t, err)
	defer g.Close(ctx)
	g.guestMinor = abi.MinorPermissions - 1 // as an older guest announces
	err = g.Boot(ctx, BootConfig{TreeID: "t", Tools: []abi.ToolDecl{{Kind: "webhook", Name: "hook"}}})
	require.ErrorIs(t, err, ErrVersion)
	require.ErrorContains(t, err, `tool hook's permission "ask"`)
	require.Equal(t, PhaseNone, g.Phase(), "the guest never ran boot")
	require.Zero(t, conn.calls, "nothing reached the database")
	require.ErrorIs(t, g.Wake(ctx), ErrNotBooted)
}

// countingConn is a cannedConn that counts the statements and
// transactions it was asked for.
type countingConn struct {
	cannedConn
	calls int
}

func (c *countingConn) Begin() error { c.calls++; return nil }
func (c *countingConn) Exec(q string, a []any) (int64, error) {
	c.calls++
	return c.cannedConn.Exec(q, a)
}
func (c *countingConn) Query(q string, a []any) (*storage.Rows, error) {
	c.calls++
	return c.cannedConn.Query(q, a)
}

// The module reads its guests' ABI version once, from a probe instance
// that touches no database, so a server refuses at start-up a guest too
// old for its configuration (a final rule, allowed models) instead of
// failing every tree's boot; a guest that speaks 1.8 passes.
func TestModuleCheckBootRefusesOlderGuestAtStart(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, guestbuild.Must(t), CompileOptions{CacheDir: guestbuild.CacheDir()})
	require.NoError(t, err)
	defer m.Close(ctx)
	final := BootConfig{Permissions: []permission.Rule{{Action: "t", Resource: "*", Decision: permission.Ask, Final: true}}}
	models := BootConfig{AllowedModels: []string{"m"}}
	require.NoError(t, m.CheckBoot(ctx, final))
	require.NoError(t, m.CheckBoot(ctx, models))
	minor, err := m.GuestMinor(ctx)
	require.NoError(t, err)
	require.Equal(t, uint16(abi.Minor), minor)

	m.minor = abi.MinorOperatorPolicy - 1 // as an older guest announces
	err = m.CheckBoot(ctx, final)
	require.ErrorIs(t, err, ErrVersion)
	require.ErrorContains(t, err, "cannot enforce the server's configuration")
	require.ErrorContains(t, err, "final flag")
	require.ErrorIs(t, m.CheckBoot(ctx, models), ErrVersion)
	require.NoError(t, m.CheckBoot(ctx, BootConfig{}))
}

// A guest older than 1.10 has no sub-agent limit: one the operator set is
// refused at start-up, and the default's absence is a warning to log
// (a guest of this build has neither).
func TestModuleCheckBootRefusesASubagentLimitAnOlderGuestLacks(t *testing.T) {
	ctx := context.Background()
	m, err := Compile(ctx, guestbuild.Must(t), CompileOptions{CacheDir: guestbuild.CacheDir()})
	require.NoError(t, err)
	defer m.Close(ctx)
	limited := BootConfig{Settings: settings.Settings{MaxSubagents: 8}}
	require.NoError(t, m.CheckBoot(ctx, limited))
	require.Empty(t, m.BootWarnings(ctx))

	m.minor = abi.MinorMaxSubagents - 1 // as an older guest announces
	err = m.CheckBoot(ctx, limited)
	require.ErrorIs(t, err, ErrVersion)
	require.ErrorContains(t, err, "does not carry max_subagents (1.10 does)")
	require.NoError(t, m.CheckBoot(ctx, BootConfig{}), "the default is not refused")
	require.Equal(t, []string{"the guest speaks ABI 1.9, which does not carry max_subagents (1.10 does): its trees' sub-agents are bounded by depth alone; rebuild the guest"}, m.BootWarnings(ctx))
}
