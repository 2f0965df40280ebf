// Package httpmsg is the HTTP vocabulary revenant's portable code speaks: a
// request, a response, a header, a handler, a response writer and a client
// (Doer), shaped like net/http's so code reads the same, without importing
// net/http.
//
// Why not net/http itself: importing it at all links its server, client,
// crypto/tls and x509 (their package initialisation keeps them), about
// 1.8 MB of a wasm binary and 520 KB of its gzip. The wasm guest and the
// Durable Object perform no network I/O of their own (the host does it), so
// core/api, the model providers and the web tools are written against these
// types, and hosts that do have net/http adapt it at their edge with
// httpmsg/nethttp (docs/RATIONALE.md, "A lean guest").
//
// The types hold data only: no I/O, no connection state. A Header is a
// map[string][]string like http.Header (the two convert to each other
// without copying), keyed by canonical names.
package httpmsg
