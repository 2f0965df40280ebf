// Package retry is revenant's one retry primitive: a Policy (a named backoff
// schedule) and a Loop that runs an operation under it, waiting on the
// host's clock between attempts (DESIGN §8, STYLE practice 9).
//
// The policies in use are Write (100 ms doubling to 2 s, for 30 s: every
// event append reruns its whole transaction under it), Settlement (1 s
// doubling to 10 s, for 15 min: lifecycle terminals that nothing else would
// re-drive), Provider (the model provider's backoff, whose waits are
// durable retry.scheduled events rather than waits in memory, so it uses
// only Policy.Delay and Policy.Allows) and Wake (1 s doubling to 1 min with
// no limit, the host's re-arm of a wake-up whose delivery failed; Delay
// only).
//
// Waits take time and timers from a Clock with the shape of core.Clock, so
// tests and the simulator drive them with virtual time; a wait ends early
// when its context ends or its stop channel closes (an instance shutting
// down), and never blocks the caller in any other way. The package imports
// only the standard library: core imports it, not the other way round, and
// it must not read the real clock (core's import test checks).
package retry
