package core

import (
	"encoding/json"
	"unicode/utf8"
)

// MaxStoredText bounds a text stored whole in one event, as it is stored:
// the bytes of its JSON string, which writes each <, > and & in six bytes
// (\u003c). A Durable Object refuses a value over 2 MB, and an event it
// refuses during a turn can be neither written nor replaced by another
// (a step neither completed nor cut keeps its turn running for good). The
// bound is api.MaxStoredConfig's, with the same room under 2 MB for the
// rest of the event. The runner holds a model's answer and a tool's output
// to it; a step cut by recovery keeps at most this much of its text.
const MaxStoredText = 1600 << 10

// StoredLen is the length of s as a JSON string, without its quotes.
func StoredLen(s string) int {
	b, _ := json.Marshal(s) // a string always encodes
	return len(b) - 2
}

// StoredPrefix is the longest prefix of s, cut at a character boundary,
// whose StoredLen is at most max: s itself if it fits. (In invalid UTF-8
// it may cut a little shorter: each stray byte is six bytes as stored.)
func StoredPrefix(s string, max int) string {
	if len(s) <= max/6 || StoredLen(s) <= max {
		return s // at most six bytes stored per byte
	}
	// Search the cuts at character starts (a UTF-8 character is at most
	// four bytes: back at most three), where the stored length grows
	// with the cut. At most max/6 bytes fit whatever they are.
	start := func(n int) int {
		for i := 0; i < 3 && n > 0 && !utf8.RuneStart(s[n]); i++ {
			n--
		}
		return n
	}
	lo, hi := max/6, len(s)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if StoredLen(s[:start(mid)]) <= max {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return s[:start(lo)]
}
