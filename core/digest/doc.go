// Package digest is SHA-256 (FIPS 180-4) without the crypto packages.
//
// core hashes a prompt's body, a tool call's idempotency key and the API's
// bearer tokens with SHA-256. crypto/sha256 would do, but importing it links
// Go's FIPS 140 module into the wasm guest: its package initialisers
// register self-tests of AES, CTR-DRBG and HMAC, so AES, GCM, SHA-3,
// SHA-512 and HMAC come along, about 50 KB of the guest's gzip size
// (docs/RATIONALE.md, "A lean guest"). This package is the algorithm
// alone, checked against crypto/sha256 by its tests. Its digests are the
// same bytes, so values already stored (prompt body hashes) still match.
//
// It imports nothing but math/bits and encoding/binary; keep it that way.
// It hashes public inputs and secrets alike in time that depends only on
// their length (no table indexed by data).
package digest
