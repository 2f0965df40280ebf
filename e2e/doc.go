// Package e2e holds revenant's black-box end-to-end tests. They build the
// revenant binary once, run it as a child process over a temporary data
// directory, drive sessions over the public HTTP API with the offline
// model's directives (/sleep, /fail, /tool), kill the server with SIGKILL at
// chosen points of a turn, restart it over the same data directory and
// check, through the API only, what DESIGN §6, §9 and §14 promise: every
// prompt answered 202 ends in exactly one terminal or is cancelled, no
// interrupted turn runs again, each session's seqs stay contiguous, and a
// question asked before a SIGKILL is still listed, under the same id, and
// answerable after it, its answer continuing the turn without asking the
// model for the parked step again.
//
// Every scenario runs in both modes of the server, as subtests named
// after the mode: inprocess (trees are core.Instances in the server) and
// guest (-guest: trees are WebAssembly guests on wazero; TestMain builds
// the guest module too). REVENANT_E2E_MODE=inprocess or guest runs one.
//
// The workerd_*_test.go files do the same for the Cloudflare host: the
// Worker and its Durable Objects under `wrangler dev` (local workerd),
// SIGKILLed and restarted on the same state, with a fake OpenAI-compatible
// provider and a webhook ledger in the test process. They are skipped
// where node or the pinned wrangler (npm ci) is missing. The three that
// carry the acceptance campaign's kills (TestWorkerdSIGKILL,
// TestWorkerdToolTurnKills, TestWorkerdWebhookLedger; WORKERD_KILL_ROUNDS
// repeats them) run alone, one after another; the other workerd tests
// run in parallel, each with its own wrangler (workerd_test.go).
//
// The package has no code outside its tests; run it with
//
//	go test ./e2e/
//
// Every test starts its own servers on 127.0.0.1 with a free port, each in
// its own process group, and stops them (by process id) when it ends.
package e2e
