//go:build js && wasm && revenant_testroutes

package durableobject

import (
	"strings"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Test-only routes, compiled in with the revenant_testroutes tag only
// (the e2e tests build a separate wasm; make do-build never has them).
// They provoke what a test cannot otherwise cause on demand:
//
//	POST /v1/sessions/{id}/test/abort  ctx.abort(): the object is evicted
//	                                   at once, mid-turn if one runs
//	POST /v1/sessions/{id}/test/panic  a Go panic in the request's handler
//	POST /v1/sessions/{id}/test/conform  storagetest's suite on this object's
//	                                   DB (testconform_js.go); ?broken=no-rollback
//	                                   runs it on a DB that never rolls back
const testRoutePrefix = "/test/"

func testRoute(o *Object, w httpmsg.ResponseWriter, r *httpmsg.Request) bool {
	if r.Method != httpmsg.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/sessions/") {
		return false
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/sessions/")
	_, what, ok := strings.Cut(rest, testRoutePrefix)
	if !ok {
		return false
	}
	switch what {
	case "abort":
		o.log.Warn("test route: aborting the object")
		o.bridge.Call("abort", "revenant test route: abort")
		panic("unreachable: ctx.abort returned") // abort throws into Go as a panic
	case "panic":
		panic("revenant test route: panic")
	case "conform":
		serveConform(o, w, r)
		return true
	}
	return false
}
