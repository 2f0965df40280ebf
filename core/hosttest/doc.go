// Package hosttest is the conformance suite of the host services core.Host
// needs besides storage (core/storage/storagetest has that one): the clock
// (Now in milliseconds, AfterFunc timers that fire once and can be
// stopped), the tree's wake-up (core.Waker: Arm keeps the earliest time, a
// delivery uses it up) and ids (core.IDSource: unique, from any goroutine,
// usable in a URL path). Every host runs it from its own test against its
// implementations:
//
//	hosttest.RunClock(t, func(conform.T) core.Clock { return RealClock{} })
//
// A virtual clock implements Advancer and the suite moves it; against a
// real clock the suite waits for its timers (tens of milliseconds; it never
// asserts a duration). The wake-up suite needs to see the armed time and to
// deliver it, so it takes an ObservableWaker; core.Waker itself only arms.
//
// The suites take a conform.T, so a test can run them on a
// conform.Recorder against a broken implementation.
//
// It imports core, core/conform, testify and the standard library: never a
// host package.
package hosttest
