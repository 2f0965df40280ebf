//go:build js && wasm

package main

import (
	"fmt"
	"os"
	"syscall/js"
)

// bridgesVar is the global under which the JS side parks each instance's
// bridge for the moment its Go program starts; REVENANT_BRIDGE names the
// entry.
const bridgesVar = "__revenantBridges"

// The roles, as the first argument.
const (
	roleFront = "front"
	roleTree  = "tree"
)

func main() {
	key := os.Getenv("REVENANT_BRIDGE")
	bridge := js.Global().Get(bridgesVar).Get(key)
	if key == "" || bridge.Type() != js.TypeObject {
		fmt.Fprintln(os.Stderr, "revenant: no bridge: start this program from worker/entry.mjs or durableobject/shim.js")
		os.Exit(2)
	}
	role := ""
	if len(os.Args) > 1 {
		role = os.Args[1]
	}
	switch role {
	case roleFront:
		serveFront(bridge)
	case roleTree:
		serveTree(bridge)
	default:
		fmt.Fprintf(os.Stderr, "revenant: unknown role %q: want %q or %q as the first argument\n", role, roleFront, roleTree)
		os.Exit(2)
	}
}
