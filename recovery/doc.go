// Package recovery decides what happens to work whose execution died: the
// boot and wake-up sweep of DESIGN §6.5 and the resume budget of §6.6.
//
// It owns policy only. Every decision is applied by core.Instance.Recover,
// which re-reads the claim and writes the outcome in one transaction under
// the tree's claim lock, so the sweep can never start two executions for one
// session or act on a claim that changed under it.
//
// There is no hidden loop: Sweep runs once when called, Boot calls it once,
// and Wake is what a host calls when the tree's wake-up fires. Tests and the
// simulator step them by hand.
//
// Imports: core and the standard library only.
package recovery
