package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
)

// An Idempotency-Key is 1 to 200 printable ASCII characters, given once;
// anything else is 400 invalid_request naming the header. Its digest is
// the body's SHA-256, byte for byte.
func TestParseCreateKey(t *testing.T) {
	key, err := api.ParseCreateKey(nil, []byte(`{}`))
	require.NoError(t, err)
	assert.Nil(t, key, "no header: no key")

	for _, ok := range []string{"k", "a b", "~!@#$%^&*()", strings.Repeat("k", api.MaxIdempotencyKeyLen)} {
		key, err := api.ParseCreateKey([]string{ok}, []byte(`{}`))
		require.NoError(t, err, "%q", ok)
		sum := sha256.Sum256([]byte(`{}`))
		assert.Equal(t, api.CreateKey{Key: ok, Digest: hex.EncodeToString(sum[:])}, *key)
	}
	for _, bad := range [][]string{{""}, {strings.Repeat("k", api.MaxIdempotencyKeyLen+1)}, {"a\tb"}, {"a\x7f"}, {"caf\u00e9"}, {"a", "a"}} {
		_, err := api.ParseCreateKey(bad, nil)
		require.Error(t, err, "%q", bad)
		e := api.ErrorOf(err)
		assert.Equal(t, api.ErrInvalidRequest, e.Type, "%q", bad)
		assert.Contains(t, e.Message, "Idempotency-Key", "%q", bad)
	}
}
