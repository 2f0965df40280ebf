package permission_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/permission"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "http:api.example.com", true},
		{"", "", true},
		{"", "x", false},
		{"http:*.example.com", "http:api.example.com", true},
		{"http:*.example.com", "http:a.b.example.com", true},
		{"http:*.example.com", "http:example.com", false},
		{"http:*.example.com", "http:api.example.com.evil.net", false},
		{"http:api.example.com", "http:API.example.com", false}, // case-sensitive
		{"kv:*", "kv:", true},
		{"kv:a?", "kv:ab", false},  // '?' is literal
		{"kv:a?", "kv:a?", true},   // …and matches itself
		{`kv:\*`, `kv:\x`, true},   // '\' is literal, '*' still a wildcard
		{"a*b*c", "aXbYbZc", true}, // backtracking over the last star
		{"a*b*c", "aXbYbZ", false},
		{"*a*a*a*b", strings.Repeat("a", 40), false},
		{"tool:*", "tool:deploy", true},
		{"**", "anything", true},
		{"héllo*", "héllo wörld", true},
		// Each literal run takes its own characters, in order: the first
		// begins s, the last ends it, and none overlaps another.
		{"kv:*", "x kv:a", false},     // the first run only at the start
		{"*ab*b", "ab", false},        // the middle run may not use the suffix's bytes
		{"*a*a*", "a", false},         // two runs, two a's
		{"x*aa*aa*y", "xaaay", false}, // runs do not overlap
		{"x*aa*aa*y", "xaaaay", true},
		{"*a**b*", "a", false}, // a run after an empty one ("**") still counts
		{"*a**b*", "XaYbZ", true},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, permission.Match(c.pattern, c.s), "Match(%q, %q)", c.pattern, c.s)
	}
}

// reference matches with a regular expression built from the pattern: the
// meaning the package doc gives the syntax, written independently.
func reference(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`).MatchString(s)
}

func FuzzMatch(f *testing.F) {
	f.Add("http:*.example.com", "http:api.example.com")
	f.Add("a*b*c", "aXbYbZc")
	f.Add("*a*", "bab")
	f.Add("", "")
	f.Add("*?*", "x?y")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 256 {
			return
		}
		if !utf8Valid(pattern) || !utf8Valid(s) {
			return // the reference regexp works on runes
		}
		require.Equal(t, reference(pattern, s), permission.Match(pattern, s), "Match(%q, %q)", pattern, s)
		require.True(t, permission.Match(s, s), "every string matches itself as a pattern")
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestRuleValidate(t *testing.T) {
	ok := permission.Rule{Action: "http_request", Resource: "http:*.example.com", Decision: permission.Ask}
	require.NoError(t, ok.Validate())
	require.NoError(t, permission.Rule{Action: "*", Resource: "*", Decision: permission.Deny}.Validate())
	require.NoError(t, permission.Rule{Action: "*", Resource: "*", Decision: permission.Ask, Final: true}.Validate())
	require.NoError(t, permission.Rule{Action: "*", Resource: "*", Decision: permission.Deny, Final: true}.Validate())
	bad := []struct {
		rule permission.Rule
		msg  string
	}{
		{permission.Rule{Resource: "*", Decision: "allow"}, "action: must be 1 to 64 characters"},
		{permission.Rule{Action: "http request", Resource: "*", Decision: "allow"}, "action: must be a tool name"},
		{permission.Rule{Action: strings.Repeat("a", 65), Resource: "*", Decision: "allow"}, "action: must be 1 to 64"},
		{permission.Rule{Action: "x", Resource: " ", Decision: "allow"}, "resource: must be 1 to 1024 bytes, not blank"},
		{permission.Rule{Action: "x", Resource: "a\nb", Decision: "allow"}, "resource: must not contain control characters"},
		{permission.Rule{Action: "x", Resource: "\xff", Decision: "allow"}, "resource: must be valid UTF-8"},
		{permission.Rule{Action: "x", Resource: "*", Decision: "maybe"}, `decision: must be "allow", "ask" or "deny"`},
		{permission.Rule{Action: "x", Resource: "*"}, `decision: must be`},
		{permission.Rule{Action: "x", Resource: "*", Decision: "allow", Final: true}, `final: only an "ask" or "deny" rule can be final`},
	}
	for _, b := range bad {
		err := b.rule.Validate()
		require.Error(t, err, "%+v", b.rule)
		assert.Contains(t, err.Error(), b.msg)
	}
	err := permission.ValidateRules([]permission.Rule{ok, {Action: "x", Resource: "*", Decision: "no"}})
	require.EqualError(t, err, `[1].decision: must be "allow", "ask" or "deny"`)
	many := make([]permission.Rule, permission.MaxRules+1)
	require.ErrorContains(t, permission.ValidateRules(many), "at most 256 rules")
}
