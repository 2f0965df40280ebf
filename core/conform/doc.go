// Package conform is the scaffolding the conformance suites share
// (core/storage/storagetest, core/hosttest): T, the part of *testing.T a
// suite uses, and Recorder, a T that records failures instead of reporting
// them, so a test can run a suite against a deliberately broken
// implementation and check that the suite catches it.
//
// A suite takes T rather than *testing.T for that reason only; Wrap adapts
// a *testing.T. Like *testing.T, FailNow and Skip end the calling goroutine
// (runtime.Goexit), so they may be called only from the goroutine running
// the test, never from one it started.
//
// It imports only the standard library and builds for every target core
// does.
package conform
