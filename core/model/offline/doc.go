// Package offline is the offline model: a model.Model that needs no
// provider, no network and no key. It is a documented feature, not a test
// double: revenant uses it by default when no provider is configured (and
// says so at start), the README walk-through runs on it, and tests drive
// sessions with it.
//
// It echoes the user's prompt word by word and obeys directives written in
// the prompt (/tool, /ask, /task, /sleep, /fail); docs/offline-model.md
// describes them for users.
//
// Invariants:
//
//   - Its output is a pure function of the request: the same request gives
//     the same chunks, byte for byte, on every host and every run. Only the
//     pauses between chunks depend on the injected Timer, never their content.
//   - It never reads the clock or sleeps by itself: pauses go through the
//     Timer given to New, so hosts and the simulator own time.
//
// It imports only the standard library and core/model; in
// particular not core (the Timer interface is the one method of core.Clock
// it needs), and not math/rand.
package offline
