//go:build js && wasm

package main

import (
	"fmt"
	"os"
	"syscall/js"

	"github.com/revenantrt/revenant/worker"
)

// serveFront is the front role: the front's decisions for the isolate
// (worker.Serve), its bearer tokens from the REVENANT_TOKENS secret. A
// malformed token list ends the program (entry.mjs answers 500 and says
// to read the log). It never returns.
func serveFront(bridge js.Value) {
	f, err := worker.New(os.Getenv("REVENANT_TOKENS"))
	if err != nil {
		// The token list is a secret: the error names an entry by position only.
		fmt.Fprintln(os.Stderr, "revenant front:", err)
		os.Exit(2)
	}
	worker.Serve(bridge, f)
}
