// Package httpargs is the http_request tool's arguments: parsed the same
// way where the request is sent (tools/web) and where only its resources
// are needed (the wasm guest, whose host sends the request under its
// policy).
//
// It holds the argument rules (the methods allowed, an absolute URL, header
// names that are tokens, values without control characters, the headers
// the client writes itself, no body on HEAD) and the resource a call
// touches ("http:" and the URL's host). It imports no crypto and nothing
// of tools/web, so a program that only declares the tool does not link the
// webhook signing (crypto/hmac, crypto/sha256, whose FIPS module keeps AES,
// SHA-3, SHA-512 and a DRBG) or the address rules; a test keeps the guest
// free of them (internal/archtest).
package httpargs
