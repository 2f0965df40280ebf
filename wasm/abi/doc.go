// Package abi is revenant's versioned WebAssembly ABI: the constants (the
// export and import names, status codes, phases, version 1.x) and a compact
// binary encoding of every message that crosses between a wasip1 guest
// (wasm/guest) and its host (wasm/runtime, or any other host that follows
// docs/abi.md).
//
// Messages are sequences of fields: unsigned and zig-zag varints,
// length-prefixed byte strings, single bytes, little-endian float64, never
// JSON. Maps (HTTP headers) are encoded with sorted keys, so an encoding is
// a pure function of its value: a simulator compares guest outputs byte for
// byte. Decoders never panic and never allocate past what the input could
// hold; every failure wraps ErrMalformed.
//
// The package is portable Go (linux/amd64 and wasip1/wasm) and imports
// nothing of revenant's but core/settings, the configuration type every
// host shares, which BootConfig carries: both sides of the boundary use it.
package abi
