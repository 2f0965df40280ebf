package permission_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/permission"
)

// A session may hold 256 rules of up to 1024 bytes, and a call's resource
// is as long as its arguments make it (an http_request host has no bound
// but the prompt's, 256 KiB): matching must not cost the product of the
// two. A rule "http:*aaa…ab" against a host of a's costed a backtracking
// matcher about a second per rule at this size (minutes of a server's CPU
// for one call against 256 such rules); a matcher that looks for each
// literal run once takes about a millisecond. The bound is far from both.
func TestMatchCostIsNotPatternTimesResource(t *testing.T) {
	pattern := "http:*" + strings.Repeat("a", permission.MaxResourceLen-7) + "b"
	s := "http:" + strings.Repeat("a", 1<<20)
	start := time.Now()
	matched := permission.Match(pattern, s)
	took := time.Since(start)
	assert.False(t, matched)
	assert.Less(t, took, 250*time.Millisecond, "Match of a %d-byte pattern against a %d-byte resource", len(pattern), len(s))
}
