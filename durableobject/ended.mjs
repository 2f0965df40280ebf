// A Go program's end as an answer: the Tree object (shim.js) waits for
// Go's answer to a request, or for the program's end, whichever comes
// first. A panic that escaped Go ends the program and leaves the answer's
// Promise unsettled forever.
//
// This module imports nothing, so the js/wasm tests (ended_js_test.go)
// evaluate it as it is.

// untilEnded settles as answer does, or rejects once program (startGo's:
// its ended Promise) has ended, if that comes first.
export function untilEnded(program, answer) {
  const ended = program.ended.then(() => {
    throw new Error("the Go program exited");
  });
  return Promise.race([answer, ended]);
}
