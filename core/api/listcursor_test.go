package api_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/api"
)

// A list cursor is accepted only as Encode writes it: text that merely
// decodes to something like one is refused, so a client's mistake is a
// 400, never a page read from some other place.
func TestListCursorOnlyAsEncoded(t *testing.T) {
	valid := func(id string) bool { // lowercase letters and digits, as a host's ids
		for _, c := range id {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
				return false
			}
		}
		return id != ""
	}
	for _, c := range []api.ListCursor{{CreatedAt: 0, ID: "a"}, {CreatedAt: 1700000000123, ID: "nyp27qkzwla422vs6mspssbjps"}, {CreatedAt: api.MaxCursor, ID: "z"}} {
		got, ok := api.ParseListCursor(c.Encode(), valid)
		assert.True(t, ok, c.Encode())
		assert.Equal(t, c, got)
	}
	// A well-formed cursor names a place, whether or not a page ended there.
	forged := base64.RawURLEncoding.EncodeToString([]byte("9999999999999:zzz"))
	got, ok := api.ParseListCursor(forged, valid)
	assert.True(t, ok)
	assert.Equal(t, api.ListCursor{CreatedAt: 9999999999999, ID: "zzz"}, got)

	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	good := enc("10:a")
	for name, s := range map[string]string{
		"empty":               "",
		"not base64":          "!!",
		"padded":              base64.URLEncoding.EncodeToString([]byte("10:a")),
		"standard alphabet":   base64.StdEncoding.EncodeToString([]byte("10:a?")),
		"stray bits":          good[:len(good)-1] + string(good[len(good)-1]+1),
		"no colon":            enc("10a"),
		"negative":            enc("-5:a"),
		"signed":              enc("+10:a"),
		"leading zero":        enc("010:a"),
		"spaces":              enc(" 10:a"),
		"past int64":          enc("9223372036854775808:a"),
		"past MaxCursor":      enc("9007199254740992:a"),
		"no time":             enc(":a"),
		"empty id":            enc("10:"),
		"id the host refuses": enc("10:bad/id"),
		"trailing text":       good + "A",
	} {
		_, ok := api.ParseListCursor(s, valid)
		assert.False(t, ok, "%s: %q", name, s)
	}
}
