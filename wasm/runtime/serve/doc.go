// Package serve runs one tree's wasm guest in real time, for servers: real
// timers, real egress (the model provider with the host-held key, tools
// with tools/web and its egress policy), and an http.Handler that turns an
// *http.Request into a guest request and streams the response back (an
// event stream flushes each event).
//
// A Tree is safe for concurrent use; it serializes guest calls. A guest
// that dies is replaced by a fresh one, booted on the same connection, at
// the next use. Guest calls run with a context of their own: a client that
// goes away cancels its request in the guest, never the guest call.
//
// A Tree keeps the tree's wake-up in a timer of its own, for callers
// without a host. host/ wires this in for its wazero backend: one Tree per
// active tree, Config.ArmWake feeding its durable wake-up index, which
// delivers the wake-ups (Tree.Wake), so it sets Config.NoWakeTimer; and
// Tree.Idle tells its eviction whether an execution runs in the guest.
package serve
