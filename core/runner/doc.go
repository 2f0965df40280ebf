// Package runner is the turn runner: the core.Driver that calls the model,
// streams its answer with text checkpoints, and runs the tools it asks for,
// step after step until the model stops (DESIGN §6.6–§7).
//
// Everything it decides is read back from the database at the top of each
// loop, so a fresh execution after a crash continues exactly where the dead
// one left off:
//   - a step recorded complete is never requested again;
//   - a step that was streaming when its execution died is marked cut, keeping
//     its checkpointed text, and a new step follows the continuation notice;
//   - a tool call found `executing` is executed again with the same
//     idempotency key only if its tool is idempotent; otherwise it settles as
//     interrupted and the model is told the outcome is unknown;
//   - calls of a Blocking tool (the question tool) are not executed: once
//     the step's other calls settled, the execution ends Parked with one
//     session.step.parked event (park.go); a call found `waiting` with its
//     blockers resolved settles through its adapter's continuation, so the
//     model is not asked again for the parked step.
//
// Watchdogs (stream idle, step wall time, tool wall time) and the durable
// step cap run on the host clock, so tests and the simulator drive them with
// virtual time. The runner imports core, core/model and core/tool, and no
// host package.
package runner
