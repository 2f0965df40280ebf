//go:build js && wasm && !revenant_testroutes

package durableobject

import "net/http"

// testRoute serves nothing: the test-only routes are in a build with the
// revenant_testroutes tag only (testroutes_js.go).
func testRoute(*Object, http.ResponseWriter, *http.Request) bool { return false }
