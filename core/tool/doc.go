// Package tool is the contract for tools a model may call: what each
// declares (schema, idempotency, the resources it touches, timeout, output
// cap) and how it is executed (a context and an idempotency key).
//
// The turn runner writes a call's `executing` phase durably, with the key,
// before Execute runs. After a crash an idempotent tool is executed again
// with the same key; a non-idempotent one is not, and the model is told its
// outcome is unknown. A tool that touches anything outside the tree must
// therefore either be idempotent under its key or declare itself not
// idempotent.
//
// A Blocking tool (the question tool) is never executed: its calls wait for
// a person. The runner parks the step with the blockers the tool's Ask
// returns, and the call settles later from the committed reply through the
// blocker's versioned adapter in core (question@1).
package tool
