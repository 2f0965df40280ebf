//go:build revenant_testroutes

package worker

import "github.com/revenantrt/revenant/core/api"

// testRoutes, in the e2e tests' build only, forwards the object's
// test-only routes (durableobject/testroutes_js.go: abort, panic) to the
// tree's object after the usual checks; GET ones go as reads (the front
// may send a read again).
var testRoutes = []api.Route{
	{Method: "POST", Pattern: "/v1/sessions/{id}/test/{what}"},
	{Method: "GET", Pattern: "/v1/sessions/{id}/test/{what}"},
}

// testBuild lets entry.mjs honour test-only settings
// (REVENANT_OWNER_CACHE=stale).
const testBuild = true
