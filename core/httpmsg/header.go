package httpmsg

import (
	"slices"
	"strings"
)

// Header is a message's header fields, keyed by canonical name
// (CanonicalKey), like http.Header: a plain conversion turns one into the
// other without copying.
type Header map[string][]string

// Get returns the first value of key, or "".
func (h Header) Get(key string) string {
	if v := h[CanonicalKey(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values returns every value of key (not a copy).
func (h Header) Values(key string) []string { return h[CanonicalKey(key)] }

// Set replaces key's values with value.
func (h Header) Set(key, value string) { h[CanonicalKey(key)] = []string{value} }

// Add appends value to key's values.
func (h Header) Add(key, value string) {
	k := CanonicalKey(key)
	h[k] = append(h[k], value)
}

// AddReceived appends value as a field received from a peer: without the
// spaces and tabs around it, which are not part of a field's value
// (RFC 9110 §5.5), as net/http reads a request's fields. A host that
// takes fields from elsewhere (workerd passes a value's trailing
// whitespace on) adds them with it, so every host reads the same value.
func (h Header) AddReceived(key, value string) {
	h.Add(key, strings.Trim(value, " \t"))
}

// Del removes key.
func (h Header) Del(key string) { delete(h, CanonicalKey(key)) }

// Clone returns a deep copy of h; nil for nil.
func (h Header) Clone() Header {
	if h == nil {
		return nil
	}
	c := make(Header, len(h))
	for k, v := range h {
		c[k] = slices.Clone(v)
	}
	return c
}

// Keys returns h's keys, sorted.
func (h Header) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	SortStrings(keys)
	return keys
}

// SortStrings sorts s in place, as slices.Sort does. It is a heap sort
// written out because slices.Sort's instantiation for strings costs the
// wasm guest about 7 KB gzip; its callers' lists (header names and the
// like) can come from a client or a model, so it stays O(n log n).
func SortStrings(s []string) {
	down := func(i, n int) {
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && s[c+1] > s[c] {
				c++
			}
			if s[i] >= s[c] {
				return
			}
			s[i], s[c] = s[c], s[i]
			i = c
		}
	}
	for i := len(s)/2 - 1; i >= 0; i-- {
		down(i, len(s))
	}
	for n := len(s) - 1; n > 0; n-- {
		s[0], s[n] = s[n], s[0]
		down(0, n)
	}
}

// CanonicalKey returns key in the canonical form net/http uses: the first
// letter and every letter after a hyphen upper case, the others lower case
// ("content-type" → "Content-Type"). A key holding a byte that is not a
// token character (a space, a colon, a non-ASCII byte) is returned
// unchanged, as net/textproto does, so it can never alias a valid name.
func CanonicalKey(key string) string {
	upper := true
	canonical := true
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !isTokenByte(c) {
			return key
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
		}
		upper = c == '-'
	}
	if canonical {
		return key
	}
	b := []byte(key)
	upper = true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return string(b)
}

// isTokenByte reports whether c may appear in a header field name (RFC 9110
// token: visible ASCII except delimiters).
func isTokenByte(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	switch c {
	case '"', '(', ')', ',', '/', ':', ';', '<', '=', '>', '?', '@', '[', '\\', ']', '{', '}':
		return false
	}
	return true
}
