package api_test

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/api"
)

// section returns the lines of a "## Title" section of a markdown file.
func section(t *testing.T, doc, title string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == title
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	require.NotEmpty(t, out, "docs/api.md has no section %q", title)
	return out
}

func cells(line string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// docs/api.md is the contract: its route table and error table list exactly
// what the handler serves and answers.
func TestDocsMatchHandler(t *testing.T) {
	raw, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	doc := string(raw)

	var documented, served []string
	for _, line := range section(t, doc, "Routes") {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			if strings.HasPrefix(line, "| "+m+" ") {
				c := cells(line)
				documented = append(documented, c[0]+" "+strings.Trim(c[1], "`"))
			}
		}
	}
	for _, r := range api.Routes {
		served = append(served, r.Method+" "+r.Pattern)
	}
	sort.Strings(documented)
	sort.Strings(served)
	assert.Equal(t, served, documented, "routes in docs/api.md")

	documentedErrors := map[api.ErrorType]int{}
	for _, line := range section(t, doc, "Errors") {
		if strings.HasPrefix(line, "| `") {
			c := cells(line)
			status, err := strconv.Atoi(c[1])
			require.NoError(t, err, line)
			documentedErrors[api.ErrorType(strings.Trim(c[0], "`"))] = status
		}
	}
	assert.Equal(t, api.Statuses, documentedErrors, "error table in docs/api.md")
}
