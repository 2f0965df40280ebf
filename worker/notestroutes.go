//go:build !revenant_testroutes

package worker

import "github.com/revenantrt/revenant/core/api"

// testRoutes are forwarded like any tree route; only a build with the
// revenant_testroutes tag has any (testroutes.go).
var testRoutes []api.Route
