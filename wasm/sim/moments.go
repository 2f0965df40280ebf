package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// moments is what the simulator watches as the host between transactions:
// the promises that hold at every moment, which a later state can hide
// (check.Probe), and the virtual time a dead guest's work waited for the
// boot that took it up again.
type moments struct {
	probe    *check.Probe
	observed map[string]bool // rule, session and detail already reported
	broken   bool            // no guest boots: the tree cannot go on
	// diedAt is when the serving guest last died or was abandoned; the
	// next boot that resumes or starts a claim measures its latency from
	// it.
	diedAt    int64
	latencies []int64 // virtual ms, one per claim a boot resumed or started
	// delivering is true while the tree's wake-up is being delivered (the
	// wake handler, or the boot that stands in for it): the wake-up is
	// taken out of t.wake meanwhile, but it is not used up until the
	// delivery ran to its end (deliverWake), so claims are not without one.
	delivering bool
	// hotAt is the instant of the latest wake-up delivery, hotN how many
	// there were at it (hotWake).
	hotAt   int64
	hotN    int
	hotSeen bool
}

// wakeInterval is the guests' wake interval (settings.WakeInterval,
// which the simulator leaves at its default).
const wakeInterval = 10 * time.Second

// bootMark is the tree as a boot began.
type bootMark struct {
	gseq   int64
	faults int // the disk's faults so far (diskFaults)
}

// probeOf opens the tree's probe on first use.
func (t *tree) probeOf() *check.Probe {
	if t.probe == nil {
		p, err := check.OpenProbe(t.path)
		if err != nil {
			t.notef("probe unreadable", "%v", err)
			return nil
		}
		t.probe = p
	}
	return t.probe
}

func (t *tree) closeProbe() {
	if t.probe != nil {
		if err := t.probe.Close(); err != nil {
			t.failf("close the probe: %v", err)
		}
		t.probe = nil
	}
}

// observe records a violation seen now, once per tree.
func (t *tree) observe(boot int, o check.Observation) {
	key := string(o.Rule) + "\x00" + o.Session + "\x00" + o.Detail
	if t.observed == nil {
		t.observed = map[string]bool{}
	}
	if t.observed[key] {
		return
	}
	t.observed[key] = true
	o.At, o.Boot = t.now, boot
	t.ledger.Observed = append(t.ledger.Observed, o)
}

func (t *tree) probeFailed(what string, err error) {
	t.notef("probe failed", "%s: %v", what, err)
}

// died forgets a guest killed (or dead on its own) at a host call.
func (t *tree) died(g *guest) {
	if g == t.cur {
		t.diedAt = t.now
	}
	t.reap(g)
}

// checkCommit: after every commit of a live instance, every queued or
// running prompt's session is claimed (DESIGN §6.1, §6.3), a claim sleeps
// only on a retry its own execution scheduled (check.RuleRetryOwned), and
// a claimed tree has its wake-up armed (§4 rule 1: armed before or in the
// claim's transaction; rule 2: a wake handler re-arms as its last act). The
// guest may die right after any commit, and then only the wake-up boots
// the tree again: a client's resend, which boots it sooner here, would
// hide the lost wake-up. While the wake-up is being delivered, it still
// counts as armed (delivering).
func (t *tree) checkCommit(g *guest) {
	p := t.probeOf()
	if p == nil {
		return
	}
	obs, err := p.Unclaimed()
	if err != nil {
		t.probeFailed("unclaimed", err)
		return
	}
	for _, o := range obs {
		o.Detail += " after a commit"
		t.observe(g.boot, o)
	}
	stray, err := p.StrayRetries()
	if err != nil {
		t.probeFailed("stray retries", err)
		return
	}
	for _, o := range stray {
		t.observe(g.boot, o)
	}
	if t.wake == 0 && !t.delivering {
		t.claimsWithoutWake(g.boot, "the session is claimed with no wake-up armed after a commit")
	}
}

// checkWakeArmed: after a wake handler or a boot returns, a claimed tree
// has its wake-up armed (DESIGN §4 rules 2 and 3): a delivered wake-up is
// used up, and nothing else would boot the tree after a kill.
func (t *tree) checkWakeArmed(g *guest, when string) {
	if t.wake == 0 {
		t.claimsWithoutWake(g.boot, "the session is claimed with no wake-up armed "+when)
	}
}

// checkWakeDue: with the serving guest at rest (after each of its calls
// and boots), the wake-up armed is due no later than the earliest retry
// of a claim sleeping on one, and no later than one wake interval from
// now while a claim is not sleeping (check.RuleWakeDue). Only the wake-up
// brings a sleeping claim back: armed later, the retry runs late, and a
// kill meanwhile keeps it late.
//
// Trees are not judged while their storage fails (wakeDueExcused): a
// sweep or a write that storage stops re-arms on the storage schedule
// instead (1, 2, 4… s), later than a retry that cannot run before storage
// is back anyway.
func (t *tree) checkWakeDue(g *guest) {
	p := t.probeOf()
	if p == nil || !t.created || t.wakeDueExcused() {
		return
	}
	if t.bootLock != nil && t.bootLock.n > 0 {
		t.bootLock.wakeDueJudged++
	}
	obs, err := p.WakeDue(t.wake, t.now, wakeInterval.Milliseconds())
	if err != nil {
		t.probeFailed("wake due", err)
		return
	}
	for _, o := range obs {
		t.observe(g.boot, o)
	}
}

// checkSweepArm: once a sweep ended (the guest announced it serves
// again), its last arm, the wake handler's re-arm from durable state
// (DESIGN §4 rules 2 and 3), covers the claims left: no later than the
// earliest retry of a claim sleeping on one, nor than one wake interval
// while a claim is not sleeping (check.RuleWakeDue). The host keeps an
// earlier wake-up armed, and the sweep arms each sleeping claim's retry on
// its own, which hides a re-arm that is late from the wake-up; a host
// whose wake-up is the re-arm alone (a sweep stopped by storage) runs the
// retry late.
func (t *tree) checkSweepArm(g *guest) {
	if g.dead || g.g.Phase() == runtime.PhaseSweep {
		return
	}
	t.noteCleanSweep(g)
	if g.sweepArm == 0 {
		return
	}
	at := g.sweepArm
	g.sweepArm = 0
	p := t.probeOf()
	if p == nil || !t.created || t.diskFaults() != g.sweepFaults {
		// Storage failed in the sweep: it re-armed on the storage
		// schedule after its re-arm (as in checkWakeDue).
		return
	}
	obs, err := p.WakeDue(at, t.now, wakeInterval.Milliseconds())
	if err != nil {
		t.probeFailed("wake due", err)
		return
	}
	for _, o := range obs {
		o.Detail = "the sweep's last arm (its re-arm): " + o.Detail
		t.observe(g.boot, o)
	}
}

// wakeDueExcused says the tree's wake-up is not judged on its due time
// now (checkWakeDue): its disk fails writes now (a disk-full window, a
// boot fault), another connection holds its write lock, or storage
// refused a write (or reported a durable commit failed) since the last
// sweep in which, and after which, it refused none (noteCleanSweep): the
// sweeps' back-off on the storage schedule outlasts the fault. Until
// session 54 trees whose storage may fail were skipped for their whole
// life; with the skip held only while a lock was, seeds gave 3 and 10
// violations, every one that back-off.
func (t *tree) wakeDueExcused() bool {
	return t.fault != nil && t.fault.Failing() || t.lock != nil || t.diskFaults() != t.cleanFaults
}

// noteCleanSweep runs once guest g's latest sweep ended (it serves): if
// storage refused nothing since that sweep began and no lock is held, the
// wake-up it re-armed is judged again (wakeDueExcused).
func (t *tree) noteCleanSweep(g *guest) {
	if t.lock == nil && t.diskFaults() == g.sweepFaults {
		t.cleanFaults = g.sweepFaults
	}
}

// storageFails says the tree's storage may refuse writes: its disk fails
// (a disk-full window, a boot fault), or another connection takes its
// write lock within boots (bootfault.go).
func (t *tree) storageFails() bool { return t.fault != nil || t.bootLock != nil }

// diskFaults counts the writes storage refused (the tree's disk failed
// them, or another connection's write lock: t.busy) and the commits the
// disk reported failed though durable (0 for storage that never fails).
func (t *tree) diskFaults() int {
	refused, late := t.diskFaultsApart()
	return refused + late
}

// diskFaultsApart is diskFaults apart: the writes storage refused, and
// the commits the disk reported failed though durable.
func (t *tree) diskFaultsApart() (refused, late int) {
	if t.fault == nil {
		return t.busy, 0
	}
	return t.fault.Failed() + t.busy, t.fault.LateCommits()
}

// hotWakes is how many deliveries of the wake-up at one virtual instant
// make a hot loop (RuleWakeLoop).
const hotWakes = 200

// hotWake runs after each delivery of the wake-up: one re-armed at or
// before now is delivered again at once, and virtual time stands still
// meanwhile. A handler that keeps doing so (a sweep that cannot make
// progress, re-armed in the past) spins: the host would deliver it
// back to back. After hotWakes deliveries at one instant it is reported
// (check.RuleWakeLoop) and pushed a second ahead, as a host that takes
// time per delivery would see, so the tree goes on.
func (t *tree) hotWake() {
	if t.now != t.hotAt {
		t.hotAt, t.hotN = t.now, 0
	}
	t.hotN++
	at := t.wake
	if t.hotN < hotWakes || t.wake == 0 || t.wake > t.now {
		return
	}
	t.wake, t.hotN = t.now+1000, 0
	if t.hotSeen {
		return // reported once per tree, at its first loop
	}
	t.hotSeen = true
	boot := 0
	if t.cur != nil {
		boot = t.cur.boot
	}
	why := ""
	if p := t.probeOf(); p != nil {
		if due, err := p.RetriesDue(t.now); err == nil && len(due) > 0 {
			why = fmt.Sprintf("; claims sleeping on a retry already due: %s", strings.Join(due, ", "))
		}
	}
	t.observe(boot, check.Observation{Rule: check.RuleWakeLoop,
		Detail: fmt.Sprintf("the wake-up was delivered %d times at one instant and is armed at or before it again (%d ms before it), the disk failing: %v%s",
			hotWakes, t.now-at, t.fault != nil && t.fault.Failing(), why)})
}

// checkStranded: at quiescence nothing is due, so no wake-up is armed: a
// claim left now waits for a client that may never call.
func (t *tree) checkStranded() {
	boot := 0
	if t.cur != nil {
		boot = t.cur.boot
	}
	t.claimsWithoutWake(boot, "the session is claimed with nothing due: no wake-up armed, no client calling")
}

// claimsWithoutWake reports every claimed session as a claim left without
// a wake-up (the caller has seen that none is armed).
func (t *tree) claimsWithoutWake(boot int, detail string) {
	p := t.probeOf()
	if p == nil {
		return
	}
	claimed, err := p.Claimed()
	if err != nil {
		t.probeFailed("claims", err)
		return
	}
	for _, sid := range claimed {
		t.observe(boot, check.Observation{Rule: check.RuleWakeArmed, Session: sid, Detail: detail})
	}
}

func (t *tree) beforeBoot() bootMark {
	var m bootMark
	// Before the first boot made the schema there is nothing to read, and
	// commit position 0 is right.
	if p := t.probeOf(); p != nil && t.created {
		n, err := p.Gseq()
		if err != nil {
			t.probeFailed("commit position", err)
		}
		m.gseq = n
	}
	m.faults = t.diskFaults()
	return m
}

// afterBoot: a boot that returned has swept every claim before serving
// (DESIGN §6.5: resumed, started or ended each one not sleeping on a
// retry) and re-armed the wake-up (§4 rule 3). A sweep that met a disk
// fault (a write the full disk failed, or a commit reported failed though
// it was stored) stops and leaves the rest to the next wake-up, as
// designed, so its boot is not judged. It measures the resume latency of
// the claims it took up.
func (t *tree) afterBoot(g *guest, m bootMark) {
	t.checkWakeArmed(g, "after a boot")
	t.checkWakeDue(g)
	t.checkSweepArm(g)
	p := t.probeOf()
	if p == nil {
		return
	}
	unswept, swept, err := p.Unswept(m.gseq, t.now)
	if err != nil {
		t.probeFailed("unswept", err)
		return
	}
	if t.diskFaults() > m.faults {
		if len(unswept) > 0 {
			t.notef("boot left claims to the next wake-up: its sweep met a disk fault", "boot %d: %s", g.boot, unswept[0].Detail)
		}
		unswept = nil
	}
	for _, o := range unswept {
		t.observe(g.boot, o)
	}
	if t.diedAt != 0 {
		for range swept {
			t.latencies = append(t.latencies, t.now-t.diedAt)
		}
		t.diedAt = 0
	}
}

// percentiles are p50, p99 and the maximum of xs (sorted in place).
func percentiles(xs []int64) (p50, p99, max int64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	at := func(q float64) int64 { return xs[min(len(xs)-1, int(q*float64(len(xs))))] }
	return at(0.50), at(0.99), xs[len(xs)-1]
}
