//go:build js && wasm

// Command front is the Go program of revenant's front Worker (worker/),
// built with syumai/workers. worker/entry.mjs runs it in two ways: one
// long-lived instance per isolate whose decide the hot session routes
// call, and syumai's entry, which starts a new instance per request, for
// create, list and delete (docs/RATIONALE.md).
package main

import (
	"fmt"
	"os"

	"github.com/revenantrt/revenant/worker"
	"github.com/syumai/workers/cloudflare"
)

func main() {
	f, err := worker.New(cloudflare.Getenv("REVENANT_TOKENS"))
	if err != nil {
		// The token list is a secret: the error names an entry by position only.
		fmt.Fprintln(os.Stderr, "revenant front:", err)
		os.Exit(2)
	}
	worker.Serve(f)
}
