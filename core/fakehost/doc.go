// Package fakehost provides deterministic stand-ins for the host side of
// core.Host: a virtual clock, a recording wake-up, sequential ids, and a
// database wrapper that can "kill" the instance before or after a chosen
// commit. Tests and the simulator use them; production hosts never do.
//
// It imports only core/storage and the standard library, so it builds for
// every target core does.
package fakehost
