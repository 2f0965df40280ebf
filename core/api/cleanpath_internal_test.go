package api

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// cleanPath agrees with its definition, path.Clean leaving the path
// (without one trailing slash) as it is, on every path of up to six
// characters over '/', '.' and 'a'.
func TestCleanPathIsPathClean(t *testing.T) {
	want := func(p string) bool {
		if p == "" || p[0] != '/' {
			return true
		}
		trimmed := strings.TrimSuffix(p, "/")
		return trimmed == "" || path.Clean(trimmed) == trimmed
	}
	var walk func(p string)
	walk = func(p string) {
		assert.Equal(t, want(p), cleanPath(p), "cleanPath(%q) against path.Clean", p)
		if len(p) < 6 {
			for _, c := range "/.a" {
				walk(p + string(c))
			}
		}
	}
	walk("")
}
