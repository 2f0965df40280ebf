// Package backend is host/'s wazero backend: every active tree of a
// host.Host runs as one instance of the wasip1 guest (wasm/guest), from one
// module compiled once (with an on-disk compilation cache), driven in real
// time by wasm/runtime/serve on the tree's connection, which the host owns
// and which outlives guest instances. Runtime implements host.GuestRuntime;
// cmd/revenant wires it into the host.
//
// The dependency points one way: this package imports host (for the
// interface it implements) and host imports nothing under wasm/
// (internal/archtest keeps it so). Everything around a guest stays the
// host's: the index, the connection, one guest per tree, eviction, and the
// wake-up, which the host stores when the guest arms it and delivers
// itself (serve delivers none).
package backend
