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
const testHookHeader = "X-Revenant-Test-Hook"

// testWriter wraps w for a request that asks for a test hook.
func testWriter(w *responseWriter, r *httpmsg.Request) httpmsg.ResponseWriter {
	if r.Header.Get(testHookHeader) == "fail-after-head" {
		return failAfterHead{w}
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
