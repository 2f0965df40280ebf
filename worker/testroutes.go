//go:build revenant_testroutes

package worker

import (
	"net/http"
	"strings"
)

// testRoute reports whether r is one of the object's test-only routes
// (POST /v1/sessions/{id}/test/{what}, durableobject/testroutes_js.go),
// which a front built with the revenant_testroutes tag forwards like any
// tree route: token, id form and owner check first. Test builds only
// (make do-build DO_TAGS=revenant_testroutes); make do-build never has it.
func testRoute(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	segs := strings.Split(r.URL.EscapedPath(), "/") // "", "v1", "sessions", id, "test", what
	return len(segs) == 6 && segs[1] == "v1" && segs[2] == "sessions" && segs[4] == "test" && segs[5] != ""
}
