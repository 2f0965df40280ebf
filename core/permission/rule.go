package permission

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Decision is what a rule says about a call.
type Decision string

// Decisions, from the most to the least permissive.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// Valid reports whether d is one of Allow, Ask and Deny.
func (d Decision) Valid() bool { return d == Allow || d == Ask || d == Deny }

// strictness orders decisions: a call touching several resources takes
// the strictest.
func (d Decision) strictness() int {
	switch d {
	case Allow:
		return 0
	case Ask:
		return 1
	}
	return 2 // Deny, and anything unknown: fail closed
}

// Source says where a rule came from, for the Verdict and for logs.
type Source string

// Sources, in precedence order (see the package doc).
const (
	FromDefault Source = "default" // the tool's default decision
	FromConfig  Source = "config"  // REVENANT_CONFIG `permissions`
	FromSession Source = "session" // the session's config at creation
	FromSaved   Source = "saved"   // an `always` reply of the tree
)

// Limits on rules, so a session's config stays small.
const (
	MaxActionLen   = 64
	MaxResourceLen = 1024
	MaxRules       = 256
)

// Rule maps calls of a tool matching Action, touching a resource matching
// Resource, to a Decision. Both patterns use the package's glob syntax,
// except that an Exact rule's Resource is the one resource it covers,
// compared literally ('*' included): what an `always` reply saves.
//
// A Final rule is the operator's (Policy.Config only) and asks or denies:
// when it decides the base layer, no overlay rule may make the call less
// strict (see the package doc). A deny is final without it.
type Rule struct {
	Action   string   `json:"action"`
	Resource string   `json:"resource"`
	Decision Decision `json:"decision"`
	Exact    bool     `json:"exact,omitempty"`
	Final    bool     `json:"final,omitempty"`
}

// Matches reports whether the rule covers a call of action touching
// resource.
func (r Rule) Matches(action, resource string) bool {
	if r.Exact {
		return r.Resource == resource && Match(r.Action, action)
	}
	return Match(r.Action, action) && Match(r.Resource, resource)
}

// Validate checks the rule's fields, naming the first bad one in words a
// client can act on ("action: must be …").
func (r Rule) Validate() error {
	if err := ValidateAction(r.Action); err != nil {
		return fmt.Errorf("action: %w", err)
	}
	if err := ValidateResource(r.Resource); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	if !r.Decision.Valid() {
		return errors.New(`decision: must be "allow", "ask" or "deny"`)
	}
	if r.Final && r.Decision == Allow {
		return errors.New(`final: only an "ask" or "deny" rule can be final (final keeps a session's rules and always replies from lifting it)`)
	}
	return nil
}

// ValidateRules checks a list of rules (at most MaxRules), naming the
// first bad one by its index ("[2].decision: …").
func ValidateRules(rules []Rule) error {
	if len(rules) > MaxRules {
		return fmt.Errorf("at most %d rules, not %d", MaxRules, len(rules))
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("[%d].%w", i, err)
		}
	}
	return nil
}

// ValidateAction checks an action pattern.
func ValidateAction(p string) error {
	if p == "" || len(p) > MaxActionLen {
		return fmt.Errorf("must be 1 to %d characters", MaxActionLen)
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*') {
			return errors.New("must be a tool name, with '*' for any run of characters (letters, digits, '_', '-', '*')")
		}
	}
	return nil
}

// ValidateResource checks a resource pattern.
func ValidateResource(p string) error {
	if strings.TrimSpace(p) == "" || len(p) > MaxResourceLen {
		return fmt.Errorf("must be 1 to %d bytes, not blank (\"*\" matches every resource)", MaxResourceLen)
	}
	if !utf8.ValidString(p) {
		return errors.New("must be valid UTF-8")
	}
	if strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return errors.New("must not contain control characters")
	}
	return nil
}

// Match reports whether s matches the glob pattern: '*' matches any run of
// characters (the empty run included), everything else only itself.
//
// The pattern is literal runs between stars: the first must begin s, the
// last must end it, and each one between is found at its leftmost place
// after the one before (a later star can absorb whatever a later place
// would have skipped). Each run is looked for once, so the cost is about
// len(pattern)+len(s), not their product: a call's resource is as long as
// its arguments make it, and a session may hold 256 rules.
func Match(pattern, s string) bool {
	first := strings.IndexByte(pattern, '*')
	if first < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:first]) {
		return false
	}
	s, pattern = s[first:], pattern[first+1:]
	last := strings.LastIndexByte(pattern, '*')
	suffix, middle := pattern, ""
	if last >= 0 {
		suffix, middle = pattern[last+1:], pattern[:last]
	}
	if !strings.HasSuffix(s, suffix) {
		return false
	}
	s = s[:len(s)-len(suffix)]
	for middle != "" {
		run, rest, _ := strings.Cut(middle, "*")
		middle = rest
		if run == "" {
			continue
		}
		i := strings.Index(s, run)
		if i < 0 {
			return false
		}
		s = s[i+len(run):]
	}
	return true
}
