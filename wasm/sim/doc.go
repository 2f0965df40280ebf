// Package sim is the seeded eviction simulator (DESIGN §14): it runs many
// simulated sessions, each a tree with its root session and a sequence of
// prompts, against the real guest (the core compiled to a wasip1 reactor,
// run by wasm/runtime), kills the guest at host calls, reboots it over the
// same database as a real host would, runs superseded instances on as
// zombies, fills some trees' disks for windows of virtual time
// (internal/faultvfs), each bordered by a stretch of late IOERRs (commits
// durable but reported failed), and hands every tree's database and
// side-effect ledger, with every durable event the guests emitted (and
// which steps' live deltas each emitted, and when each was last quiet), to
// package check.
//
// The nemesis kills through the runtime's Interpose hook, before or after
// the operation of any import, in the boot, sweep or serve phase. Its
// targets are spread evenly over the imports each phase was seen to make,
// not by how often they are made, so rare ones (a cancelled egress, a
// rollback, an armed wake-up) are killed at too; a plan whose target does
// not come kills at a random later site, so the budget is spent unless a
// tree goes quiet first (a session is extended with more work a few times
// to spend it; the report counts the kills actually made).
//
// The nemesis also supersedes a serving guest at an egress_start, before
// the request goes out (maybeSupersede): it boots the successor within
// that call, as a second host that took the tree over between the guest's
// last write and its request would. A zombie abandoned between calls never
// gets that far (its next write meets core's fence first), so only this
// reaches the runtime's epoch check on egress, which must refuse the
// request; one that gets past it reaches the receiver and is a zombie's
// egress (check.RuleZombie).
//
// A zombie's commit is judged at its connection: it is past the fence if a
// newer boot owns the tree's epoch by then. An epoch belongs to the guest
// whose COMMIT made it durable, reported failed (a late IOERR) or not, as
// read after every COMMIT on the simulator's own connection; a guest that
// booted read-only owns none until its first accepted write takes one, so
// an older guest holding the epoch meanwhile is no zombie yet.
//
// A share of the trees (Config.SmallBudget) runs with a resume budget of 1
// or 2 instead of the default 10, which no turn of a campaign reaches: so
// budgets are exhausted and the rules of a budget reached are judged (the
// count past it aborts at once, a resume within it is never given up, each
// turn counts its own). The ledger records each tree's budget for the
// checker (and for -check of kept trees).
//
// The trace of one tree (Config.Trace, revenant simulate -trace N; trace.go)
// follows a violation from its seed: the guests' own log lines, which the
// runtime otherwise discards, and what the simulator did to and for them,
// each at its virtual time. It only writes, so it changes no history.
//
// The client behaves like a careful one: every prompt carries an id, a
// request the dead guest never answered is sent again to its successor,
// and a 5xx is retried later (after an interrupt's first 5xx, half the
// clients send a plain prompt first: a turn that interrupt already told
// to stop records it later and must spare that prompt). In half of the
// disk-full windows (made longer than the 30 s write schedule) the user
// interrupts a turn stuck on the full disk, 30.5, 34 and 40.5 s after the
// window's first failed write (watchStuck): the turn has given up its
// write by then and waits
// in the storage failure that ends it, so the interrupt meets a turn that
// ends another way once the disk recovers and starts the next prompt,
// which an interrupt answered 200 must have stopped too. One interrupt in
// three is sent again 1 to 300 ms later by an impatient client, so the
// second may find the turn ended while the first still stops its
// sub-agents (and must answer only after them). Some prompts ask
// for long answers (40 to 160 words, seconds of streaming), so text
// checkpoints are written and kills and interrupts cut steps that kept
// some (check.RuleCutKeeps). Prompts with /ask park their turn on a
// question; the clients list the pending questions (polling, after every
// boot, and when the tree goes quiet) and answer, cancel, race two
// answers, repeat a response_id (now and then with another body), race a
// reply with an interrupt, or put the question off past more kills
// (questions.go); the nemesis now and
// then kills right after a reply's commit, from a small reserve of the
// kill budget kept for replies. Calls of the ahook tool ask for permission
// first (its default is ask); the same clients list the pending requests
// and approve them once or always, or reject them, plainly or with a
// message. Prompts with /task start sub-agents
// (workload.go, tasking): foreground and background children of the root,
// children that call a ledger tool or sleep, a child that starts its own
// child, two children in one turn; the kills, zombies and full disks land
// in them as anywhere, and package check judges each child, job, notice and
// task result. Children ask too: a foreground child parks on its question
// while its parent's turn waits on it, a background child asks after its
// parent went on, a child's ahook call asks for permission, and a child's
// own child asks (two waits in a chain). The root's lists are tree-wide, so
// the same clients find the children's questions and requests there and
// reply with the same plans, on the root's path or the child's (now and
// then listing the child's own, or racing a reply with an interrupt of the
// child); after an always approval the client calls ahook again, from the
// root or a child, which must not ask, except in the share of trees
// (Config.FinalAsk) whose operator made the ask on ahook final: there an
// always reply approves its call only, and every call asks again. Late in
// a tree's life (its kill
// budget spent) a client sometimes never replies, so trees end with turns,
// and parents of asking children, visibly waiting.
//
// Some clients interrupt an asking child instead of replying, once the
// tree went quiet (childprompt.go, quietChild): one in three questions of
// a child its parent's turn waits on gets no reply, and one in two
// children still parked so at quiescence (a question put off or
// abandoned) is interrupted too. Quiet, the tree's wake-up is used up
// (every session parked or idle, no claim, the last wake-up delivered); the
// interrupt's commit ends the child's turn and resolves the parent's task
// blocker, which hands the parent a claim, so only a wake-up armed before
// that commit would boot the tree after a kill (claim-has-wake-up, judged
// after every commit). Interrupts raced with replies mostly come while the
// tree is busy, with a wake-up still armed, and rarely met that state.
//
// Clients also send children prompts of their own (childprompt.go,
// workload.childPrompt): a moment after a prompt that starts sub-agents,
// straight to the newest child that runs its task turn, or is parked, or
// to any (read from the tree's sessions, as a client reads the snapshot's
// children). Such a prompt queues behind the task turn and then runs a
// turn of its own: words, a sleep, a ledger tool call, or a question of
// its own. Half are followed a moment later by an interrupt of the
// child's parent, which must stop only the task turn, one in six by an
// interrupt of the child itself, which may end them; kills land in them as
// anywhere, and the sweep must resume them like a root's turns, never
// orphan them. The ledger records every interrupt sent, so the checker
// can tell the child's own interrupt from its parent's
// (check.RuleChildOwnPrompt). One in eight is first sent under the
// child's own notice id (notice-<child>-1, which the API reserves: a
// prompt holding it would wedge the child's end); anything but a 400 for
// it is a violation of the simulation, and once refused it goes again
// under its own id.
//
// A share of the trees (Config.Scripted) runs the guest's
// OpenAI-compatible provider against a scripted model the simulator
// answers (script.go) instead of the offline model, which asks for one
// tool call per step. The scripted model reads the same tool directives
// (/tool, /ask, /task; /sleep and /fail are words to it, so its trees have
// no long turns), and a
// directive line that begins with "+" joins the step before, so half of
// these trees' prompts ask for several calls in one step: a foreground
// child beside a question (the child ends while the question is pending,
// or asks too), two webhook calls, a call that asks for permission beside
// a question, two foreground children, a background child beside a
// question (workload.multiStep). Its answers are a pure function of the
// request, so a resumed execution gets the same answer.
//
// The scripted model also fails as a provider does (provider.go): some
// steps are answered with 1 to 3 retryable failures first (a 429 with
// Retry-After or retry-after-ms, a 503, a 500, a broken connection), some
// with one more than the tree's retry budget (1 to 3 retries, delays of
// 1 to 8 s, Retry-After of up to 15 s, capped at 20 s: longer than the
// wake interval, so sweeps run while claims sleep), so turns sleep on scheduled
// retries (claims with retry_at) that only the wake-up brings back, and
// turns fail type model. How often a step fails is drawn from the seed
// and the step (its prompt and the steps answered before it); the
// simulator counts each step's requests, so the n-th request of a step
// gets the n-th answer whichever instance sends it: a retried request is
// the same request, and the retry count it continues is durable too. The
// host side judges, with the guest at rest after each of its calls and
// boots, that the wake-up armed is due no later than the earliest
// sleeping claim's retry_at, and within one wake interval while a claim
// is not sleeping (check.RuleWakeDue), and judges the same of a sweep's
// last arm once the sweep ended: the wake handler's re-arm from durable
// state, which the host's wake-up hides (an earlier arm stays, and the
// sweep arms each sleeping claim's retry on its own). Trees whose disk
// fails are left out of the first, sweeps that met a storage fault out of
// the second: those re-arm on the storage schedule. A wake-up delivered
// again and again at one instant, re-armed in the past while nothing
// progresses, is a hot loop (check.RuleWakeLoop; hotWake). Each delivery
// of the wake-up to a serving guest goes in the ledger with the commit
// positions around it, the disk's failed writes and late IOERRs so far
// and whether the guest had a timer set, as each commit goes with its
// guest and the disk's faults when its transaction began, so the
// checker can tell a claim the guest took and left to its next wake-up
// (check.RuleStartsHere). The checker judges
// the log's retries (check.RuleRetryNotEarly, RuleRetryBudget,
// RuleRetryDelay, RuleRetryHint: each failure of the scripted provider
// carries a mark in its message, and the ledger records the wait it asked
// for; provider.go).
// A share of the trees (Config.Deletes, revenant simulate -deletes; none
// by default) is deleted by its client (delete.go): DELETE
// /v1/sessions/{root} at a moment of the tree's life, drawn on a
// generator of its own: a moment after one of its prompts arrived (its
// turn, or the queue, runs), a moment after a listing showed a question
// or permission request pending, while the sub-agents of a prompt that
// starts them run, or when the tree first went quiet. The nemesis kills
// in the delete as anywhere, and one DELETE in two (while the kill budget
// lasts) is aimed at: just before its first commit, or just after the
// delete's own. The client sends the DELETE again after a kill or a 5xx
// until it is answered 204 (or 404); the rest of the workload goes on, and
// every request of it sent after the delete's commit must be answered 404.
// The host side watches the guest's commits while a DELETE is out: just
// before the commit that removes the root session's row, it copies the
// committed database (treeNNNN.before.db), which package check judges by
// every rule but those that hold only at quiescence (check.Options.Cut:
// the delete cut the tree's work short); once that commit is seen, the
// ledger (check.Deletion) records the DELETEs' answers, the requests sent
// after it and theirs, the egress started and the boots made after it,
// with the claims each found. The simulator keeps the database file (a
// host drops it), so the checker sees any row the delete left; and now
// and then it stops the deleted tree's guest once the DELETE was answered,
// so the later requests boot a fresh guest over the emptied database
// (check.RuleDeleteGone, RuleDeleteAnswer, RuleDeleteEmpty). A deleted
// tree is hashed by its copy's log.
//
// A share of the trees (Config.BootFault, revenant simulate -bootfault;
// none by default) has its disk fail within a boot (bootfault.go): at the
// first COMMIT of a boot's sweep, its listing of the claims, while a
// session is claimed and the disk works, every write starts failing for
// 200 ms to 20 s (SQLITE_FULL, or an IOERR), a few times in the tree's
// life. The disk-full windows cannot do this: they follow virtual time,
// which stands still within a boot, and a window already open when a boot
// starts makes the instance read-only, where each write is tried once.
// Here the recovery's write waits on core's write schedule, on a guest
// timer no boot export fires, so the guest must cut that wait and serve,
// leaving the recovery to the wake-up its failed sweep arms; a boot that
// fails there (not by a kill) is a violation of the run (RuleSimulation),
// though the host pauses and boots again, as after any failed boot.
// A share of the trees (Config.BootLock, revenant simulate -bootlock; none
// by default) meets the other storage fault a boot meets there: at the
// same point another connection of the simulator's (as a backup or an
// operator's sqlite3 would) takes the tree's write lock, writing nothing,
// for 200 ms to 20 s of virtual time, a few times in the tree's life.
// Every transaction of the guest's begins as a write, so each is refused
// SQLITE_BUSY meanwhile (the simulator's connections wait for no lock, as
// one whose busy timeout is spent), reads and boots too; the recovery's
// write waits on the write schedule, and the boot must serve as above.
// Some of these windows open earlier (maybeListingLock): at the BEGIN of
// the session listing that follows the epoch a boot took (or a reopen:
// the wake handler booting again an instance a failed delete closed), the
// same generator draws, half the time, to take the lock there instead, so
// the listing is refused, then the sweep; the guest must serve past that
// too, watching each session from its next committed event (wasm/guest
// watchListed). That draw came in session 54: the histories of seeds run
// with -bootlock above 0 changed then; with it at 0 none did.
// The run lets go of the lock as a step of its own when its time comes,
// or as a failed boot's pause passes it. The refusals count with the
// disk's failed writes wherever the checks excuse a sweep or a start that
// storage stopped, and such trees get no superseded zombies. They are
// not judged on their wake-up's due time (checkWakeDue) from a refusal
// until a sweep in which storage refused nothing has ended, as trees
// whose disk fails are not: the sweeps' back-off on the storage schedule
// outlasts the fault. The report counts the windows, the boots that met one and
// served (the guest cut the wait), and the transactions refused, and of
// the windows those that refused a session listing.
// A share of the scripted trees' prompts (Config.Flood, revenant
// simulate -flood; none by default) asks the scripted model for a text
// answer streamed in 1100 server-sent events (script.go, floodAnswer),
// which the simulator delivers in one call: more live deltas than a
// watch's subscription holds (1024). The report counts the calls that
// emitted fewer deltas than their events (the watch fell behind and
// subscribed again); check.RuleDeltas is judged there as anywhere.
// A share of the deleted trees (Config.DeleteFault, revenant simulate
// -delfault; none by default) has its delete fail after it closed the
// instance (deletefault.go): the disk refuses the COMMIT of the delete's
// transaction (seen as in beforeCommit), 1 to 3 times in the tree's life,
// so the DELETE is answered 5xx, the tree stays, and the wake-up the
// guest armed reopens the instance (wasm/guest reopen). At that reopen's
// session listing, half the time, another connection takes the write
// lock for 200 ms to 5 s, refusing the listing and the sweep: the reopen
// must serve all the same. A reopen that did not leaves the instance
// closed, so the next wake-up reopens it again with no DELETE between,
// which only a delete's close explains: that is a failure of the run
// (checkReopenServed). Without it a delete failed after the close only
// as a disk-full window or a boot lock happened to be open, and no
// campaign reached a reopen's refused listing. The report counts the
// delete commits refused, the reopens after them, and the listings of
// those refused.
// A share of those reopens (Config.ReopenRace, revenant simulate
// -reopenrace; none by default) meets a successor (maybeRaceReopen): at
// the reopen's first or second BEGIN, before it takes its epoch, the
// serving guest is abandoned as a zombie inside its wake call and a new
// guest boots within that call, as a second host that took the tree
// over while the old one's wake-up reopened it would. The reopen goes on
// in the zombie and must take nothing (core.Reopen checks the closed
// instance's ownership in its epoch's own transaction); a zombie credited
// with a new epoch after a newer boot took one took the tree back from
// that boot, a commit past the fence (checkEpochTaker,
// check.RuleZombie). Before it no boot ever happened within a reopen:
// zombies are made between calls or at a serving guest's egress_start,
// and a wake-up goes to the serving guest only. Session 57: with
// core.Reopen not checking, seed 1 (-sessions 20 -deletes 1 -delfault 1
// -reopenrace 1) shows 24 such commits; with it, none. The draws are a
// stream of their own, and the rule draws nothing: the histories of
// seeds run without -reopenrace did not change.
// A share of the trees (Config.Stops, revenant simulate -stops; none by
// default) has its guests stopped gracefully as well as killed (stop.go):
// about half the kill plans that fire there stop the guest instead, once
// the input it was given returns and at that virtual time, as a host's
// close does (wasm/runtime/serve's Tree.Close: Shutdown, then Close), in
// a step, in a tool call or at rest; its successor boots as after a kill.
// DESIGN §6 has a graceful stop leave what a crash leaves (interrupted
// {reason:"shutdown"}, the claim kept), so the checker's rules judge it
// unchanged. A stop lands between two exports only, as a host's does (the
// guest's calls are serialized): it cannot land within one, where a
// kill can. The draws are a stream of their own (keyStops) and spend the
// kill budget, so the histories of seeds run without -stops did not
// change. Session 61: a planted shutdown that released the interrupted
// turn's claim gave seed 1 (-sessions 40 -kills 400 -stops 0.5) 61
// violations; without it, none.
//
// The simulator is every webhook's receiver:
// it records each delivery with its Idempotency-Key in the ledger and
// answers in virtual time, now and then with a failure.
//
// Determinism is the point: a campaign is a function of its seed. Each
// session gets its own sub-seed, virtual clock, database file and guests,
// and runs as one sequential process: the runtime's calls are synchronous,
// every clock and random byte the guest sees comes from the session's
// Services, and the driver advances virtual time to the next due timer,
// wake-up, egress answer or client action, in (time, sequence) order.
// Sessions run in parallel on a worker pool and their results are combined
// in session order, so the history hash is the same on any core count.
// Each of the trees' generators draws on a key of its own (streams.go), so
// an option turned on or off changes nothing another draws. A seed's
// history is the same from one build to the next only while what the
// simulator draws stays the same: it changed for every seed once in
// session 53 (the commit "wasm/sim: each generator draws on a key of its
// own"), when the final-ask share, the provider's retry budget and the
// question asker, which had shared one key (so a tree's first draw of
// each was one number), got keys of their own; a history recorded before
// that commit does not replay after it.
//
// The package imports wasm/runtime and wasm/abi (the host side of the ABI)
// and, of core, only core/storage's row and error types that the runtime's
// Conn contract speaks: what happened is judged from the databases alone.
package sim
