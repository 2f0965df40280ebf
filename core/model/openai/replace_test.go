package openai

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// replaceAll is strings.ReplaceAll for every non-empty old: here every
// string of up to seven characters over 'a' and 'b' against several olds.
func TestReplaceAllIsStrings(t *testing.T) {
	olds := []string{"a", "b", "ab", "aa", "aba", "bbb", "abababab"}
	var walk func(s string)
	walk = func(s string) {
		for _, old := range olds {
			assert.Equal(t, strings.ReplaceAll(s, old, "[x]"), replaceAll(s, old, "[x]"), "replaceAll(%q, %q)", s, old)
		}
		if len(s) < 7 {
			walk(s + "a")
			walk(s + "b")
		}
	}
	walk("")
}
