// Package event is revenant's shared vocabulary: the versioned names and
// payloads of durable events, the reasons and failure types they carry, and
// the Event envelope. It imports nothing of ours, so every other package
// (core, recovery, hosts, the simulator's checker) can speak it.
//
// Type names carry a version suffix (session.execution.started@1). A payload
// that changes shape gets a new version and readers keep understanding the
// old one; payloads are JSON in the log.
package event
