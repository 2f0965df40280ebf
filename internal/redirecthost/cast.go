package redirecthost

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Cast is the redirect-permission tests' hosts: First, on 127.0.0.2,
// redirects /to-denied to Denied (127.0.0.3, path /secret), /to-allowed to
// Allowed (127.0.0.4, path /open) and /to-asking to Asking, a URL on
// 127.0.0.5 where nothing listens (a hop there must be refused before any
// dial). The tests give the rules: deny all but .2 and .4, ask for .5.
type Cast struct {
	First, Denied, Allowed *Host
	Asking                 string
}

// NewCast starts the cast's three servers.
func NewCast(t testing.TB) Cast {
	t.Helper()
	c := Cast{Denied: New(t, "127.0.0.3", nil), Allowed: New(t, "127.0.0.4", nil)}
	c.Asking = fmt.Sprintf("http://127.0.0.5:%d/ask", c.Denied.Port())
	c.First = New(t, "127.0.0.2", map[string]string{"/to-denied": c.Denied.URL + "/secret",
		"/to-allowed": c.Allowed.URL + "/open", "/to-asking": c.Asking})
	return c
}

// Ports are the servers' ports, for an egress policy.
func (c Cast) Ports() []int { return []int{c.First.Port(), c.Denied.Port(), c.Allowed.Port()} }

// CIDRs are the cast's addresses, 127.0.0.2 to .5, for an egress policy.
func (c Cast) CIDRs() []netip.Prefix {
	var out []netip.Prefix
	for _, a := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		out = append(out, netip.PrefixFrom(netip.MustParseAddr(a), 32))
	}
	return out
}

// URLs are First's redirecting URLs, in the order the tests fetch them:
// to Denied, to Allowed, to Asking.
func (c Cast) URLs() []string {
	return []string{c.First.URL + "/to-denied", c.First.URL + "/to-allowed", c.First.URL + "/to-asking"}
}

// Settled is an http_request call's settlement as the tests read it (the
// tool.settled event's outcome and output).
type Settled struct {
	Outcome string `json:"outcome"`
	Output  string `json:"output"`
}

// Refusals are the errors a redirect off First gets under the tests'
// rules, by the hop's host: the deny, and the ask a running call cannot put.
const (
	DeniedRefusal = `redirect not permitted: http:127.0.0.3 is declined by a permission rule (config "*": deny)`
	AskingRefusal = `redirect not permitted: http:127.0.0.5 would need approval by a permission rule (config "http:127.0.0.5": ask), which a running call cannot ask for`
)

// Check holds the settlements of calls that fetched the first len(got) of
// URLs, in order, to the tests' rules: the redirect to Denied refused
// before any request reached it, the one to Allowed followed, the one to
// Asking refused; and First's ledger lists exactly the fetched paths.
func (c Cast) Check(t testing.TB, got []Settled) {
	t.Helper()
	require.NotEmpty(t, got)
	require.LessOrEqual(t, len(got), 3)
	want := []Settled{{"error", DeniedRefusal}, {"ok", "reached 127.0.0.4"}, {"error", AskingRefusal}}
	for i, s := range got {
		assert.Equal(t, want[i].Outcome, s.Outcome, "call %d: %s", i, s.Output)
		assert.Contains(t, s.Output, want[i].Output, "call %d", i)
	}
	assert.Empty(t, c.Denied.Paths(), "nothing reached the denied host")
	if len(got) > 1 {
		assert.Equal(t, []string{"/open"}, c.Allowed.Paths())
	}
	assert.Equal(t, []string{"/to-denied", "/to-allowed", "/to-asking"}[:len(got)], c.First.Paths())
}
