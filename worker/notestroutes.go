//go:build !revenant_testroutes

package worker

import "github.com/revenantrt/revenant/core/api"

// testRoutes are forwarded like any tree route; only a build with the
// revenant_testroutes tag has any (testroutes.go).
var testRoutes []api.Route

// testBuild is false: test-only settings (REVENANT_OWNER_CACHE=stale) are
// ignored (entry.mjs).
const testBuild = false
