//go:build js && wasm && revenant_testroutes

package durableobject

import (
	"os"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// Test-only routes, compiled in with the revenant_testroutes tag only
// (the e2e tests build a separate wasm; make do-build never has them).
// They provoke what a test cannot otherwise cause on demand:
//
//	POST /v1/sessions/{id}/test/abort  ctx.abort(): the object is evicted
//	                                   at once, mid-turn if one runs
//	POST /v1/sessions/{id}/test/panic  a Go panic in the request's handler
//	POST /v1/sessions/{id}/test/fail-delete  the object's next deleteAll fails
//	POST /v1/sessions/{id}/test/delete-tree  the tree deleted in the object
//	                                   alone, its directory row kept (a front
//	                                   killed between the two)
//	POST /v1/sessions/{id}/test/conform  storagetest's suite on this object's
//	                                   DB (testconform_js.go); ?broken=no-rollback
//	                                   runs it on a DB that never rolls back
//
// and the var REVENANT_TEST_BOOT_DELAY slows every boot (testBootDelay).
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
	case "fail-delete":
		o.failNextDelete.Store(true)
		w.WriteHeader(httpmsg.StatusNoContent)
		return true
	case "delete-tree":
		if err := o.index().Delete(r.Context(), o.treeID); err != nil {
			panic(err)
		}
		w.WriteHeader(httpmsg.StatusNoContent)
		return true
	case "conform":
		serveConform(o, w, r)
		return true
	}
	return false
}

// testBootDelay makes the object's boot slow by the var
// REVENANT_TEST_BOOT_DELAY (a Go duration; unset: none), so a test can send
// a request or meet an alarm while the boot runs: the shim must hold both
// until the boot is done (blockConcurrencyWhile), never serve them unbooted.
func testBootDelay() {
	if d, err := time.ParseDuration(os.Getenv("REVENANT_TEST_BOOT_DELAY")); err == nil && d > 0 {
		time.Sleep(d)
	}
}
