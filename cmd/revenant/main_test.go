package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// env is a getenv over a map.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// A bare token in REVENANT_TOKENS (no principal:) stops the server at
// start-up with an error that prints no part of it.
func TestStartupErrorPrintsNoToken(t *testing.T) {
	const token = "Zq8xW4vR-k2Jm9Pt" // shares no 4 characters with the message
	for _, spec := range []string{token, "alice:ok-token," + token} {
		err := serve(context.Background(), []string{"-data", t.TempDir()}, env(map[string]string{"REVENANT_TOKENS": spec}))
		require.Error(t, err)
		for i := 0; i+4 <= len(token); i++ {
			assert.NotContains(t, err.Error(), token[i:i+4], "the start-up error prints part of the token")
		}
	}
}
