// A Go program's end as an answer: the Tree object (shim.js) waits for
// Go's answer to a request, or for the program's end, whichever comes
// first. A panic that escaped Go ends the program and leaves the answer's
// Promise unsettled forever.
//
// This module imports nothing, so the js/wasm tests (ended_js_test.go)
// evaluate it as it is.

// untilEnded settles as answer does, or rejects once program (shim.js's:
// its ended Promise, and exited, set as it ends) has ended, if that comes
// first.
//
// Not Promise.race(answer, an ended that throws): the program's ended
// Promise stays pending for the object's whole life, a pending Promise
// keeps every reaction added to it, and a race's reaction keeps the
// race's result: every Response the object ever answered would stay in
// memory until the program ends. The watch on the program's end is
// added once per program; each request's is dropped once answered.
export function untilEnded(program, answer) {
  return new Promise((resolve, reject) => {
    if (program.exited) return reject(exitedError());
    const waiting = (program.waiting ??= watch(program));
    waiting.add(reject);
    answer.then(resolve, reject).finally(() => waiting.delete(reject));
  });
}

// watch rejects every request still waiting when program ends.
function watch(program) {
  const waiting = new Set();
  program.ended.then(() => {
    for (const reject of waiting) reject(exitedError());
    waiting.clear();
  });
  return waiting;
}

function exitedError() {
  return new Error("the Go program exited");
}
