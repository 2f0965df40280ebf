//go:build js && wasm

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The front reads REVENANT_ALLOWED_ORIGINS as the local server does
// (cmd/revenant: the same parser, the same error) and the body cap from
// REVENANT_SETTINGS, with the list page size.
func TestFrontOptions(t *testing.T) {
	o, err := frontOptions(env(map[string]string{
		"REVENANT_TOKENS":          "alice:a-token",
		"REVENANT_ALLOWED_ORIGINS": " https://Console.example:443, ,http://localhost:3000 ",
		"REVENANT_SETTINGS":        `{"max_body":2048,"session_page_size":7}`,
	}))
	require.NoError(t, err)
	assert.Equal(t, "alice:a-token", o.Tokens)
	assert.Equal(t, []string{"https://console.example", "http://localhost:3000"}, o.AllowedOrigins)
	assert.Equal(t, int64(2048), o.MaxBody)
	assert.Equal(t, 7, o.ListLimit)

	o, err = frontOptions(env(nil))
	require.NoError(t, err)
	assert.Empty(t, o.AllowedOrigins)
	assert.Zero(t, o.MaxBody, "the API's default")
	assert.Zero(t, o.ListLimit, "the API's default")

	_, err = frontOptions(env(map[string]string{"REVENANT_ALLOWED_ORIGINS": "https://console.example/app"}))
	require.Error(t, err)
	assert.Equal(t, `REVENANT_ALLOWED_ORIGINS: allowed origin "https://console.example/app": want scheme://host[:port], as a browser's Origin header names a page (https://console.example)`, err.Error())

	_, err = frontOptions(env(map[string]string{"REVENANT_SETTINGS": `{"max_body":"big"}`}))
	assert.ErrorContains(t, err, "REVENANT_SETTINGS")
}
