package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/runner"
)

// A call's idempotency key reaches other services (DESIGN §2): a build that
// derived it differently would present a new key for a call re-executed
// after an upgrade, and the service would run it twice. It stays "rvn_"
// and the first 40 hex digits of SHA-256 over the NUL-terminated parts.
func TestIdempotencyKeyIsSHA256(t *testing.T) {
	sum := sha256.Sum256([]byte("tree\x00session\x00step\x003\x00"))
	require.Equal(t, "rvn_"+hex.EncodeToString(sum[:])[:40], runner.IdempotencyKey("tree", "session", "step", 3))
}
