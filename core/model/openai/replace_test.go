package openai

import (
	"strings"
	"testing"
)

// replaceAll is strings.ReplaceAll for every non-empty old: here every
// string of up to seven characters over 'a' and 'b' against several olds.
func TestReplaceAllIsStrings(t *testing.T) {
	olds := []string{"a", "b", "ab", "aa", "aba", "bbb", "abababab"}
	var walk func(s string)
	walk = func(s string) {
		for _, old := range olds {
			if got, want := replaceAll(s, old, "[x]"), strings.ReplaceAll(s, old, "[x]"); got != want {
				t.Errorf("replaceAll(%q, %q) = %q, want %q", s, old, got, want)
			}
		}
		if len(s) < 7 {
			walk(s + "a")
			walk(s + "b")
		}
	}
	walk("")
}
