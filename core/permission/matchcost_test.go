package permission_test

import (
	"strings"
	"testing"

	"github.com/revenantrt/revenant/core/permission"
)

// BenchmarkMatchAgainstALongResource: a session may hold 256 rules of up to
// 1024 bytes, and a call's resource is as long as its arguments make it (an
// http_request host has no bound but the prompt's, 256 KiB), so matching
// must not cost the product of the two. A rule "http:*aaa…ab" against a
// host of a's cost the backtracking matcher before 8f37a2c about 3.3 s per
// call at this size (minutes of a server's CPU for one call against 256
// such rules); looking for each literal run once, about 50 µs.
func BenchmarkMatchAgainstALongResource(b *testing.B) {
	pattern := "http:*" + strings.Repeat("a", permission.MaxResourceLen-7) + "b"
	s := "http:" + strings.Repeat("a", 1<<20)
	for i := 0; i < b.N; i++ {
		if permission.Match(pattern, s) {
			b.Fatal("matched")
		}
	}
}
