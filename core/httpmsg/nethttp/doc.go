// Package nethttp adapts net/http to httpmsg at the edge of a host that has
// net/http (the local server, tests): Handler serves an httpmsg.Handler as
// an http.Handler, Request converts a received request, and Client sends an
// httpmsg request with an *http.Client.
//
// Portable packages (core/..., tools/web, the wasm guest) never import this
// package: its whole point is that only a host's main program links
// net/http.
//
// # Resends
//
// net/http's Transport (HTTP/1) sends a request again on a new connection
// when a reused (pooled) one failed before the first byte of the answer,
// if it deems the request replayable: a GET, HEAD, OPTIONS or TRACE, or a
// request whose header map has an "Idempotency-Key" or
// "X-Idempotency-Key" entry (that exact map key), whose body is nil or it
// can reread. By then the server may have received and acted on the
// request, so that resend can deliver it twice, and revenant's tools send
// every request with an Idempotency-Key. The rule here: a request is
// handed to net/http as replayable only when its sender marked it so
// (httpmsg.Request's Replayable, with GetBody: an idempotent webhook,
// whose receiver deduplicates by key). Every other request is handed over
// with no GetBody, and when it has no body:
//
//   - a POST, PUT, PATCH, DELETE, … goes with a nil body (Content-Length: 0
//     where the method has one), and its idempotency key is moved to the
//     lower-case map key ("idempotency-key"), which net/http's check does
//     not see but HTTP/1 writes as it is (header names are
//     case-insensitive, so the server gets the key). net/http then never
//     resends it after writing any of it, and still retries it on a new
//     connection when the write failed with nothing written.
//   - a GET, HEAD, OPTIONS or TRACE, which net/http replays whatever its
//     header, goes with an empty body that is not nil, which net/http never
//     replays. That changes nothing on the wire (the transport sees it is
//     empty and sends none), but net/http cannot rewind it, so such a
//     request also loses the retry when nothing of it was written: the
//     call fails instead.
//
// HTTP/2 (net/http's bundled transport) does not use that check at all:
// it sends a request again, whatever its method or header, only on the
// errors by which the protocol says the server did not process it (the
// connection was unusable, a GOAWAY, a stream refused, or a stream reset
// by the peer with PROTOCOL_ERROR), and with a non-nil body only if it
// can reread it or wrote none of it; it lowercases every header name, so
// the moved key goes as any other.
package nethttp
