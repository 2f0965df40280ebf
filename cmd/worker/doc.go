//go:build js && wasm

// Command worker is the one Go program of revenant's Cloudflare Worker,
// built once (make do-build) into build/revenant.wasm. The Worker holds one
// WebAssembly.Module of it and starts instances in two roles, named by the
// program's first argument:
//
//   - "front": one long-lived instance per isolate, started by
//     worker/entry.mjs: the front's decisions (worker.Serve), with no I/O
//     in Go;
//   - "tree": one instance per Tree Durable Object, started by
//     durableobject/shim.js: the object's tree (durableobject.Serve).
//
// Either way the starting JS parks a bridge object under
// globalThis.__revenantBridges[REVENANT_BRIDGE] for the moment main runs;
// main takes it, sets the role's entry points on it and blocks. One
// program rather than two keeps the bundle to one copy of Go's runtime and
// of the packages both roles link (docs/RATIONALE.md, "Why is the front
// one Go instance per isolate, without syumai/workers?").
package main
