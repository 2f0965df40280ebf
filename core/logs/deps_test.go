package logs_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// guestCore is core's part of the wasm guest: every package of core and
// recovery the guest links, but the ones other work still moves off
// net/http and log/slog (core/api, core/settings, which imports it, and
// core/model/openai). Add them here once they are.
var guestCore = []string{
	"core", "core/digest", "core/event", "core/logs", "core/model", "core/model/offline",
	"core/permission", "core/retry", "core/runner", "core/schema", "core/storage", "core/tool",
	"recovery",
}

// wasip1Deps lists what pkgs depend on in the wasip1 build.
func wasip1Deps(t *testing.T, pkgs []string) []string {
	t.Helper()
	args := []string{"list", "-deps"}
	for _, p := range pkgs {
		args = append(args, "github.com/revenantrt/revenant/"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	return strings.Fields(string(out))
}

// In the guest, core's packages log through the lite logger: log/slog (and
// package log under it) would bring back its default handler and time's
// formatting (doc.go).
func TestGuestCoreLinksNoSlog(t *testing.T) {
	deps := wasip1Deps(t, guestCore)
	for _, p := range []string{"log/slog", "log"} {
		require.False(t, slices.Contains(deps, p), "core's part of the guest links %s", p)
	}
}
