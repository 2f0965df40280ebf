package core

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// A prompt's body hash is stored (prompts.body_hash) and compared with the
// hash of a retried prompt, so it must stay SHA-256 of mode, NUL, text
// whatever computes it: a build that hashed differently would refuse every
// retry of a prompt admitted before it as a conflict.
func TestBodyHashIsSHA256(t *testing.T) {
	for _, in := range []PromptInput{{}, {Mode: "queue", Text: "hello"}, {Mode: "steer", Text: string(make([]byte, 200))}} {
		want := sha256.Sum256([]byte(in.Mode + "\x00" + in.Text))
		require.Equal(t, hex.EncodeToString(want[:]), bodyHash(in))
	}
}
