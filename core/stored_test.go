package core_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core"
)

// StoredPrefix keeps the longest prefix whose JSON fits, cut between
// characters: s whole when it fits.
func TestStoredPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"a<b", 6, "a"},            // '<' is \u003c as stored
		{"a<b", 7, "a<"},           // 1 + 6
		{"ééé", 5, "éé"},           // two bytes each, stored as they are
		{"é\u2028x", 8, "é\u2028"}, // U+2028 is \u2028 as stored
		{"é\u2028x", 7, "é"},
		{"\xff\xffab", 12, "\xff\xff"}, // an invalid byte is \ufffd
		{"", 0, ""},
	} {
		got := core.StoredPrefix(tc.s, tc.max)
		assert.Equal(t, tc.want, got, "%q in %d", tc.s, tc.max)
		b, _ := json.Marshal(got)
		assert.LessOrEqual(t, len(b)-2, tc.max)
		assert.Equal(t, len(b)-2, core.StoredLen(got))
	}
	long := strings.Repeat("ü<", 1000)
	got := core.StoredPrefix(long, 1001)
	assert.True(t, utf8.ValidString(got))
	assert.Equal(t, strings.Repeat("ü<", 125), got) // 8 bytes stored each
}

// StoredPrefix is the longest prefix that fits, cut between characters,
// for strings of characters of every width and of those JSON escapes, at
// every bound: checked against the plain search over every cut.
func TestStoredPrefixIsTheLongestThatFits(t *testing.T) {
	parts := []string{"a", "<", "é", "€", "😀", "\u2028", "\n", "&"}
	longest := func(s string, max int) string {
		best := ""
		for i := range s { // i runs over the character starts
			if core.StoredLen(s[:i]) <= max {
				best = s[:i]
			}
		}
		if core.StoredLen(s) <= max {
			best = s
		}
		return best
	}
	rng := rand.New(rand.NewPCG(49, 50))
	for range 300 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		s := b.String()
		for max := 0; max <= core.StoredLen(s)+1; max++ {
			got := core.StoredPrefix(s, max)
			if !assert.Equal(t, longest(s, max), got, "%q in %d", s, max) {
				return
			}
		}
	}
}
