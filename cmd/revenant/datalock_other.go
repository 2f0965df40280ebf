//go:build !unix

package main

// lockDataDir takes no lock where flock is not available (wasm builds
// of this command are not served from a data directory).
func lockDataDir(string) (func(), error) { return func() {}, nil }
