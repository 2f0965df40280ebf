//go:build !unix

package main

// lockDataDir takes no lock where flock is not available (Windows, Plan 9
// and wasm builds of this command; the Makefile builds it for Linux): there
// nothing stops a second server on the same data directory.
func lockDataDir(string) (func(), error) { return func() {}, nil }
