// Package api is revenant's public HTTP API (docs/api.md is the contract):
// sessions, prompts, interrupts, snapshots and the live event stream. It is
// the same on every host; a host supplies the trees (Trees), the caller's
// identity (Authenticator), a clock and ids.
//
// Rules it keeps:
//   - Client mistakes are 4xx with {"error":{"type","message"}}, never a 5xx
//     and never a panic: bodies are decoded strictly (unknown fields, names
//     in another case, a name given twice, wrong types, trailing data are
//     400) and capped (413); unclean paths are 404, not redirects.
//   - Browser pages are kept out before routing (Admit): a request with an
//     Origin that is not allowed is 403, and so, when configured for a
//     server without tokens, is one whose Host is not loopback.
//   - Ownership is checked from the index (Trees.Owner) before a tree is
//     booted (Trees.Get).
//   - Another principal's session is 404, indistinguishable from a missing
//     one.
//   - A 202 for a prompt and a 200 for an interrupt are sent only after the
//     admission or the interrupt committed (core does the committing).
//   - The event stream replays durable events after the cursor, then live
//     events and deltas, each durable event exactly once, in seq order.
//
// It imports core and the standard library only, so it builds for js/wasm
// and wasip1/wasm like the rest of core.
package api
