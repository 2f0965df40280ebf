//go:build !revenant_testroutes

package worker

import "net/http"

// testRoute matches nothing: the object's test-only routes are forwarded
// by a front built with the revenant_testroutes tag only (testroutes.go).
func testRoute(*http.Request) bool { return false }
