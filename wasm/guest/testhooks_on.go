//go:build wasip1 && revenant_testhooks

package main

import "github.com/revenantrt/revenant/core/httpmsg"

// testHooks is true in the test guest (internal/guestbuild.TestHooksTag).
const testHooks = true

// testHookHeader names, in a request to the test guest (built with
// internal/guestbuild.TestHooksTag, never the guest users run), a failure
// its handler is made to meet. "fail-after-head": the first body write
// after the head panics, inside the route, as a route's bug would once its
// answer began (core/api then aborts the answer, docs/abi.md §6).
// "fail-after-write": the route's first body write is buffered, unflushed,
// and then the route panics, so the aborted end has a buffered rest to
// drop.
const testHookHeader = "X-Revenant-Test-Hook"

// testWriter wraps w for a request that asks for a test hook.
func testWriter(w *responseWriter, r *httpmsg.Request) httpmsg.ResponseWriter {
	switch r.Header.Get(testHookHeader) {
	case "fail-after-head":
		return failAfterHead{w}
	case "fail-after-write":
		return failAfterWrite{w}
	}
	return w
}

// failAfterHead is a writer whose body writes panic once the head is out.
// It keeps the writer's other methods (Flush, Drain, Abort).
type failAfterHead struct{ *responseWriter }

func (w failAfterHead) Write(b []byte) (int, error) {
	if w.wrote {
		panic("test hook: the route failed after its head")
	}
	return w.responseWriter.Write(b)
}

// failAfterWrite is a writer whose first body write is kept (buffered, as
// every write is until a Flush) and then panics, as a route that failed
// halfway through its body would.
type failAfterWrite struct{ *responseWriter }

func (w failAfterWrite) Write(b []byte) (int, error) {
	_, _ = w.responseWriter.Write(b)
	panic("test hook: the route failed halfway through its body")
}
