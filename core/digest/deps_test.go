package digest_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// core's part of the wasm guest hashes with this package, not crypto/sha256,
// whose FIPS module's initialisers would link AES, DRBG and HMAC (doc.go).
// core/api, core/settings and core/model/openai are left out until they
// are moved too.
func TestGuestCoreLinksNoCrypto(t *testing.T) {
	args := []string{"list", "-deps"}
	for _, p := range []string{"core", "core/runner", "core/schema", "core/model/offline", "core/tool", "recovery"} {
		args = append(args, "github.com/revenantrt/revenant/"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	deps := strings.Fields(string(out))
	for _, p := range []string{"crypto/sha256", "crypto/internal/fips140"} { // the FIPS module: crypto/subtle does without it
		require.False(t, slices.Contains(deps, p), "core's part of the guest links %s", p)
	}
}
