//go:build js && wasm

package durableobject

import (
	"os"
	"regexp"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endedModule is ended.mjs evaluated as it is, its exports returned as
// one object, plus a program stand-in: {ended, end()}, ended settling
// when end() is called.
func endedModule(t *testing.T) js.Value {
	t.Helper()
	src, err := os.ReadFile("ended.mjs")
	require.NoError(t, err)
	module := regexp.MustCompile(`(?m)^export `).ReplaceAllString(string(src), "")
	return jsFunc(nil, module+`
		function program() {
			const p = {};
			p.ended = new Promise((resolve) => { p.end = () => { p.exited = true; resolve(); }; });
			return p;
		}
		// gc is Node's collector, reached as V8 allows once the flag is set.
		require("v8").setFlagsFromString("--expose-gc");
		const gc = require("vm").runInNewContext("gc");
		// retained answers n requests of program p whose answers come
		// before its end, then counts how many of those answers are still
		// held by anything after a collection.
		async function retained(p, n) {
			const refs = [];
			for (let i = 0; i < n; i++) {
				const answer = { body: new Uint8Array(1024) };
				refs.push(new WeakRef(answer));
				await untilEnded(p, Promise.resolve(answer));
			}
			await new Promise((r) => setTimeout(r, 0)); // a new task: WeakRefs of this one are kept through it
			gc();
			return refs.filter((r) => r.deref() !== undefined).length;
		}
		// counted is a program whose ended counts the reactions added to it.
		function counted() {
			const p = program();
			const ended = p.ended;
			p.reactions = 0;
			p.ended = { then(f, r) { p.reactions++; return ended.then(f, r); } };
			return p;
		}
		async function answerAll(p, n) {
			for (let i = 0; i < n; i++) await untilEnded(p, Promise.resolve(i));
			return p.reactions;
		}
		// waitingAfter answers n requests of program p, every other one a
		// rejection (a Go entry point that threw), and returns how many
		// p still watches for its end.
		async function waitingAfter(p, n) {
			for (let i = 0; i < n; i++) {
				await outcome(untilEnded(p, i % 2 ? Promise.reject(new Error("refused")) : Promise.resolve(i)));
			}
			return p.waiting.size;
		}
		const never = () => new Promise(() => {});
		async function outcome(promise) {
			try { return "answered " + (await promise); } catch (e) { return "rejected: " + e.message; }
		}
		return { untilEnded, program, counted, answerAll, retained, outcome, never, waitingAfter };`).Invoke()
}

// The answer comes through when Go gives it; the program's end answers a
// request Go never will, and a program already ended answers at once.
func TestUntilEndedAnswersOrEnds(t *testing.T) {
	m := endedModule(t)
	p := m.Call("program")
	v, err := awaitWithin(t, m.Call("outcome", m.Call("untilEnded", p, js.Global().Get("Promise").Call("resolve", "ok"))), "a request Go answered")
	require.NoError(t, err)
	assert.Equal(t, "answered ok", v.String())

	pending := m.Call("outcome", m.Call("untilEnded", p, m.Call("never")))
	p.Call("end")
	v, err = awaitWithin(t, pending, "a request waiting when the program ended")
	require.NoError(t, err)
	assert.Equal(t, "rejected: the Go program exited", v.String())

	// Bounded above all: a program already ended never settles its ended
	// again, so a request that only watches it waits for ever.
	v, err = awaitWithin(t, m.Call("outcome", m.Call("untilEnded", p, m.Call("never"))), "a request to a program already ended")
	require.NoError(t, err)
	assert.Equal(t, "rejected: the Go program exited", v.String(), "a program already ended")
}

// A long-lived object answers many requests with one Go program: what
// it answered is not kept for the program's life (a pending Promise keeps
// every reaction added to it, and a race's reaction keeps its answer).
func TestUntilEndedKeepsNoAnswer(t *testing.T) {
	m := endedModule(t)
	p := m.Call("program")
	v, err := await(m.Call("retained", p, 200))
	require.NoError(t, err)
	assert.LessOrEqual(t, v.Int(), 1, "answers of requests long answered are still held")
	p.Call("end")
}

// The watch on the program's end is added once per program, not once per
// request: the program's ended stays pending for the object's whole life
// and keeps every reaction added to it.
func TestUntilEndedWatchesTheEndOnce(t *testing.T) {
	m := endedModule(t)
	p := m.Call("counted")
	v, err := await(m.Call("answerAll", p, 50))
	require.NoError(t, err)
	assert.Equal(t, 1, v.Int(), "reactions added to the program's end")
	pending := m.Call("outcome", m.Call("untilEnded", p, m.Call("never")))
	p.Call("end")
	v, err = await(pending)
	require.NoError(t, err)
	assert.Equal(t, "rejected: the Go program exited", v.String(), "the one watch still answers")
}

// A request leaves the program's waiting set once answered, whether its
// answer resolved or rejected: the set lives as long as the program, and
// each entry holds its request's Promise.
func TestUntilEndedForgetsRejectedRequests(t *testing.T) {
	m := endedModule(t)
	p := m.Call("program")
	v, err := await(m.Call("waitingAfter", p, 20))
	require.NoError(t, err)
	assert.Equal(t, 0, v.Int(), "requests still watched after their answers")
	pending := m.Call("outcome", m.Call("untilEnded", p, m.Call("never")))
	p.Call("end")
	v, err = await(pending)
	require.NoError(t, err)
	assert.Equal(t, "rejected: the Go program exited", v.String())
}
