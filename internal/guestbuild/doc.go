// Package guestbuild builds the wasip1 guest (wasm/guest) for tests and
// benchmarks, once per test binary, with the go command the test runs
// under. The .wasm is a build output: it is never checked in.
//
// It imports nothing of revenant's, so any test may use it.
package guestbuild
