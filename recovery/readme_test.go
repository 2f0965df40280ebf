package recovery_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// README.md's "Embedding as a Go library" shows the body of Example
// (example_test.go) without the temporary directory it makes and the
// events it prints: the go run of `make test` checks Example, and this
// keeps the README's copy from drifting away from it.
func TestReadmeShowsExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)

	_, section, ok := strings.Cut(string(readme), "\n## Embedding as a Go library\n")
	require.True(t, ok, "README.md has no Embedding section")
	_, block, ok := strings.Cut(section, "\n```go\n")
	require.True(t, ok, "the Embedding section has no go block")
	block, _, ok = strings.Cut(block, "\n```\n")
	require.True(t, ok, "the go block does not end")

	_, body, ok := strings.Cut(string(src), "\nfunc Example() {\n")
	require.True(t, ok, "example_test.go has no Example")
	body, _, ok = strings.Cut(body, "\n\tevs, err := inst.Events(")
	require.True(t, ok, "Example no longer reads the session's events")
	// The temporary directory: README.md says in prose that Example makes dir.
	before, after, ok := strings.Cut(body, "\tdir, err := os.MkdirTemp(")
	require.True(t, ok, "Example no longer makes dir")
	_, after, ok = strings.Cut(after, "\tdefer os.RemoveAll(dir)\n\n")
	require.True(t, ok, "Example no longer removes dir")
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(before+after, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(line, "\t"))
	}
	assert.Equal(t, strings.Join(lines, "\n"), block, "README.md's embedding example is Example's body")
}
