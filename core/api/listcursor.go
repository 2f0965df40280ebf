package api

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// ListCursor is where a page of GET /v1/sessions ends: the last tree's
// created_at and id. It travels as opaque URL-safe text that every host
// writes and reads alike (the local server's index, the Cloudflare
// front), so a client follows next_cursor the same way on each, across
// restarts and deploys.
//
// A cursor names a place in the list, not a page the server remembers: a
// well-formed one the server never returned pages on from the place it
// names, still among the caller's own trees. Only text Encode could have
// written is accepted, so a malformed cursor is refused, never read as
// some other place.
type ListCursor struct {
	CreatedAt int64
	ID        string
}

// Encode returns the cursor's text: base64url (unpadded) of
// "created_at:id".
func (c ListCursor) Encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt, 10) + ":" + c.ID))
}

// ParseListCursor reads a cursor's text. ok is false unless s is what
// Encode writes for a created_at of decimal digits alone (no sign, no
// leading zero, at most MaxCursor, as every cursor: a Durable Object's SQL
// cannot take a larger one) and an id validID accepts: text that merely decodes (a
// sign, a leading zero, base64 with stray bits, padding) is not a cursor.
func ParseListCursor(s string, validID func(string) bool) (c ListCursor, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ListCursor{}, false
	}
	at, id, found := strings.Cut(string(raw), ":")
	n, isNumber := wholeNumber(at)
	if !found || !isNumber || n > MaxCursor || !validID(id) {
		return ListCursor{}, false
	}
	c = ListCursor{CreatedAt: n, ID: id}
	return c, c.Encode() == s
}
