//go:build js && wasm && !revenant_testroutes

package durableobject

import (
	"time"

	"github.com/revenantrt/revenant/core/httpmsg"
)

// testRoute serves nothing: the test-only routes are in a build with the
// revenant_testroutes tag only (testroutes_js.go).
func testRoute(*Object, httpmsg.ResponseWriter, *httpmsg.Request) bool { return false }

// testBootDelay does nothing: the boot delay is a test build's
// (testroutes_js.go).
func testBootDelay() {}

// testCreatedAt is at: the session's own created_at (testroutes_js.go).
func testCreatedAt(at int64) int64 { return at }

// testGiveUpWait is wait: the shortened wait is a test build's
// (testroutes_js.go).
func testGiveUpWait(wait time.Duration) time.Duration { return wait }

// testTurn does nothing: a turn that ignores its cancellation is a test
// build's (testroutes_js.go).
func testTurn(*Object) {}

// testWake does nothing: a panicking alarm is a test build's
// (testroutes_js.go).
func testWake(*Object) {}

// testLoseCreate does nothing: losing a create's answer is a test
// build's (testroutes_js.go).
func testLoseCreate(*Object, string) {}

// testBuild is false: the shim logs only what the product logs.
const testBuild = false
