// Package worker is revenant's front Worker on Cloudflare: the one public
// entry, in front of one Tree Durable Object per session tree
// (durableobject/) and one Directory object per principal
// (worker/directory.mjs, a small JS class over SQLite).
//
// What it owns:
//   - the checks before any object is touched (Front.Decide): the Host,
//     Origin and clean-path checks every host applies (api.Directory's
//     Admit), the route (api.Routes), the bearer token (REVENANT_TOKENS, a
//     Worker secret, parsed by api.ParseTokens: kept hashed, compared in
//     constant time; none configured: the one anonymous principal, and only
//     loopback Hosts are answered, as by the local server), and the id's
//     form: every "."-separated part 1–64 of [A-Za-z0-9_-]
//     (host.ValidTreeID's rule), so nothing else reaches idFromName;
//   - the session directory: create mints the root id (as host.RandomIDs);
//     entry.mjs creates the tree in idFromName(root) and records it in the
//     caller's Directory (idFromName("principal:"+p)); a tree it could not
//     record is deleted again, once the Directory has barred its id (asked
//     up to three times; a row there, committed with its answer lost, is a
//     create that succeeded), and the answer is 503. A create's Idempotency-Key (CreateKey) is
//     looked up in that Directory first (a known key is answered by
//     KeyAnswer, nothing created) and recorded by the PUT of the tree's
//     row, in the same transaction. List: Decide checks the limit and
//     cursor and names the Directory's page (DirectoryListPath);
//     ListAnswer shapes its rows into the local server's page and cursor. Delete checks the owner, deletes in the
//     object, then the row;
//   - forwarding: every /v1/sessions/{id}/… route goes, after the owner
//     check (the caller's Directory has the root; otherwise 404 and the
//     tree's object is never touched), to the root's object with the same
//     method, path and query (minus access_token), Authorization and
//     every X-Revenant-* header the client sent removed, and
//     X-Revenant-Tree / X-Revenant-Principal set by the front, and a
//     write's body read whole at the cap, so that a request an object
//     refused for having been given up can be sent again (entry.mjs,
//     sendToTree). The object's answer is passed through as its JS
//     stream: an event stream is never buffered.
//
// It runs as one long-lived Go instance per isolate (Serve; the "front"
// role of cmd/worker, the same wasm module as the Tree objects'): Go
// decides, synchronously and with no I/O, and worker/entry.mjs does the
// fetches (docs/RATIONALE.md, "Why is the front one Go instance per
// isolate, without syumai/workers?").
//
// It imports core/api (not core's runtime state) and syscall/js (in _js.go
// files only); never host/, durableobject/, wasm/, ncruces or syumai.
// front.go and list.go build everywhere and are tested natively.
package worker
