// Package api is revenant's public HTTP API (docs/api.md is the contract):
// sessions, prompts, interrupts, snapshots and the live event stream. It is
// the same on every host, in two parts a host composes:
//   - Directory: what is about many trees (create, list, delete, the
//     owner of a tree) over an Index, plus the checks before any tree
//     (Admit, Authorize). It never boots a tree.
//   - TreeHandler: every /v1/sessions/{id}/… route of one tree it is
//     handed (Tree: the running instance and the caller, already
//     authorized). It knows nothing of other trees.
//
// New composes both for trees in this process (Trees: an Index that also
// boots trees); host.GuestHandler composes the host's index with guests
// that serve their tree. Errors are answered by code (ErrorOf, WriteError).
//
// Rules it keeps:
//   - Client mistakes are 4xx with {"error":{"type","message"}}, never a 5xx
//     and never a panic: bodies are decoded strictly (unknown fields, names
//     in another case, a name given twice, wrong types, trailing data are
//     400) and capped (413); unclean paths are 404, not redirects.
//   - Browser pages are kept out before routing (Admit): a request with an
//     Origin that is not allowed is 403, and so, when configured for a
//     server without tokens, is one whose Host is not loopback.
//   - Ownership is checked from the index (Index.Owner) before a tree is
//     booted (Booter.Get); a DELETE boots nothing.
//   - Another principal's session is 404, indistinguishable from a missing
//     one.
//   - A 202 for a prompt and a 200 for an interrupt are sent only after the
//     admission or the interrupt committed (core does the committing).
//   - The event stream replays durable events after the cursor, then live
//     events and deltas, each durable event exactly once, in seq order.
//
// It imports core and the standard library only, so it builds for js/wasm
// and wasip1/wasm like the rest of core; and not net/http, whose linking
// alone costs a wasm binary about 520 KB of gzip: handlers speak
// core/httpmsg and route with core/api/route, and a host that has net/http
// serves them through httpmsg/nethttp.
package api
