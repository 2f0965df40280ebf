// Package runtime is the wazero backend for revenant's wasip1 guest
// (wasm/guest): Compile a guest once, Instantiate many, drive each with
// synchronous calls (Boot, Request, Timer, Egress…, Wake, Shutdown) whose
// side effects reach the host through Services during the call. Idle asks
// whether an execution runs in the guest (for eviction); DiagSQL is a
// diagnostic for benchmarks. Both need ABI 1.1 (ErrUnsupported before).
//
// Invariants:
//   - Every Guest call delivers one input, runs the guest until it is
//     quiescent (pumping while it reports pending work) and returns. Calls
//     are serialized per guest; the runtime starts no goroutine that
//     touches a guest, and wazero's clocks and randomness come from the
//     Services, so a simulator on a virtual clock gets identical histories
//     from the same seed.
//   - After a failed call (a trap or panic, the watchdog, a kill through
//     Options.Interpose, Close) the open transaction on the Conn is rolled
//     back and the instance closed; the Guest refuses further calls with
//     ErrGuestClosed, and the caller instantiates and boots a fresh one on
//     the same Conn. Boot's new epoch fences anything of the old one.
//   - The runtime owns egress, so it fences it by epoch (DESIGN §15,
//     zombie egress): before Services.StartEgress it reads the tree's
//     epoch on the Conn (inside the guest's open transaction, if any) and
//     refuses a request whose epoch (ABI 1.2) is not that one, or is
//     abi.NoEpoch (a request without one, from an older guest or to a host
//     that announced an older version, cannot be checked and goes out;
//     core's write fence stops that instance at its next write). A refused
//     request never reaches the Services; its end, code abi.EndFenced (ABI
//     1.3; to an older guest, text starting "fenced:"), is delivered
//     through the egress-end export once the running export returns,
//     within the same call.
//   - A kill is wazero's documented exit from a host function:
//     CloseWithExitCode, then panic(sys.NewExitError(…)). The watchdog and
//     Close stop a guest the same way at its next revenant import, and a
//     call that returns past its watchdog fails (CompileOptions.
//     Interruptible: wazero stops it anywhere, for slower guest code).
//   - Instantiation is cheap by construction: Compile merges Go's data
//     segments into one (dataseg.go), and on Linux a guest's memory is a
//     reserved mapping grown in place, on huge pages (memory_linux.go),
//     unmapped only once no call can run.
//
// The package imports core/storage (the Conn's rows and error codes) and
// wasm/abi (and through it core/settings, the boot configuration's knobs);
// never core's instance, recovery or a host. Subpackage serve is
// the real-time driver for servers.
package runtime
