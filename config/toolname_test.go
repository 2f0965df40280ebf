package config

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidToolNameKeepsTheRule checks the loop against the rule as a
// regexp, on edge cases and on every one- and two-byte name.
func TestValidToolNameKeepsTheRule(t *testing.T) {
	rule := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	names := []string{"", "a", "A_b-9", strings.Repeat("z", 64), strings.Repeat("z", 65), "a\n", "\na", "é", "a b", "a.b", "a/b", "a\x00"}
	for c := 0; c < 256; c++ {
		names = append(names, string([]byte{byte(c)}), string([]byte{'a', byte(c)}))
	}
	for _, name := range names {
		require.Equal(t, rule.MatchString(name), validToolName(name), "%q", name)
	}
}
