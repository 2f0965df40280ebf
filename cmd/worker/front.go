//go:build js && wasm

package main

import (
	"fmt"
	"os"
	"syscall/js"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/worker"
)

// OriginsVar names the Worker var listing the browser origins allowed to
// call the API, comma-separated, as the local server's variable of the
// same name (api.ParseOrigins).
const OriginsVar = "REVENANT_ALLOWED_ORIGINS"

// serveFront is the front role: the front's decisions for the isolate
// (worker.Serve), configured by frontOptions. A malformed variable ends
// the program (entry.mjs answers 500 and says to read the log). It never
// returns.
func serveFront(bridge js.Value) {
	o, err := frontOptions(os.Getenv)
	if err == nil {
		var f *worker.Front
		if f, err = worker.New(o); err == nil {
			worker.Serve(bridge, f)
		}
	}
	// The token list is a secret: its errors never show a token (they name
	// an entry by its position or its principal).
	fmt.Fprintln(os.Stderr, "revenant front:", err)
	os.Exit(2)
}

// frontOptions reads the front's configuration: its bearer tokens from
// the REVENANT_TOKENS secret, the allowed browser origins from
// REVENANT_ALLOWED_ORIGINS, and from REVENANT_SETTINGS the body cap,
// max_body (the trees' own cap, so the front refuses exactly what the
// object would), and a list page's size, session_page_size.
func frontOptions(getenv func(string) string) (worker.Options, error) {
	origins, err := api.ParseOrigins(getenv(OriginsVar))
	if err != nil {
		return worker.Options{}, fmt.Errorf("%s: %w", OriginsVar, err)
	}
	s, err := parseSettings(getenv(SettingsVar))
	if err != nil {
		return worker.Options{}, err
	}
	return worker.Options{Tokens: getenv("REVENANT_TOKENS"), AllowedOrigins: origins, MaxBody: s.MaxBody, ListLimit: s.SessionPageSize}, nil
}
