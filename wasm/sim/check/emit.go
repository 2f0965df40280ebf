package check

import (
	"maps"
	"slices"
)

// RuleEmits: every durable event reaches the host's emit exactly once, in
// commit order (docs/abi.md §4, Emit), a commit reported failed that was
// durable all the same (a late IOERR) included. An instance that dies
// between a commit and its emit never emits those events (the host
// catches up from the log), so only what an instance committed before its
// last emit is owed. A commit reported failed is emitted at the start of
// its instance's next transaction: an instance closed before one (a zombie
// retired once idle) never emits it, so where the ledger says which
// instance committed what, a commit is owed by its own instance only.
const RuleEmits Rule = "emit-once-in-order"

// Emits are the durable events the host received through emit, and where
// each instance started. A nil *Emits (a tree run in process, with no
// host) is not checked.
type Emits struct {
	// From maps each instance, by boot number, to the tree's commit
	// position (the highest events.gseq) when it was started: whatever it
	// commits comes after.
	From map[int]int64 `json:"from"`
	// Events are the durable events received (live deltas left out), in
	// the order they arrived.
	Events []Emitted `json:"events,omitempty"`
	// Commits say which instance committed which events: each commit
	// attempt that made the log grow, a commit reported failed included
	// (nil: unknown, and every event after an instance's start counts as
	// its own).
	Commits []Commit `json:"commits,omitempty"`
	// Deltas are the live deltas received, the first of each instance
	// and step only, in the order they arrived (RuleDeltas).
	Deltas []Delta `json:"deltas,omitempty"`
	// Settled maps each instance, by boot number, to the commit position
	// (the highest events.gseq) when a call into it last returned with
	// the guest quiet, every goroutine of it blocked (nil: not recorded;
	// RuleDeltas).
	Settled map[int]int64 `json:"settled,omitempty"`
}

// Commit is one commit of an instance's that made the log grow: the
// events with From < gseq <= To.
type Commit struct {
	Boot int   `json:"boot"`
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Refused counts the writes the tree's storage had refused, Late the
	// commits it had reported failed though durable (a late IOERR), when
	// the commit's transaction began (RuleStartsHere).
	Refused int `json:"refused,omitempty"`
	Late    int `json:"late,omitempty"`
	// Failed says the COMMIT was reported failed though it was durable
	// (RuleStartsHere).
	Failed bool `json:"failed,omitempty"`
}

// Emitted is one durable event as an instance emitted it.
type Emitted struct {
	Boot    int    `json:"boot"`
	ID      string `json:"id"`
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	Type    string `json:"type"`
}

// emits checks RuleEmits. Each emitted event must be in the log as emitted,
// and emitted once; each instance's emits must follow the commit order; and
// every stored event an instance committed before its last emit must have
// been emitted. Events committed after an instance's last emit may be
// missing: it may have died before emitting them. Without Commits, every
// event after an instance's start counts as its own (or as one a
// superseded instance committed and emitted in between); with them, an
// event another instance committed is that instance's to emit: a zombie's
// COMMIT reported failed (a late IOERR), closed before its next
// transaction, is never emitted, and its successor never saw it.
func (ck *checker) emits(l *Ledger) {
	if l.Emits == nil {
		return
	}
	byID := map[string]*rec{}
	byGseq := map[int64]*rec{}
	for _, sid := range ck.h.order {
		log := ck.h.logs[sid]
		for i := range log {
			byID[log[i].ID] = &log[i]
			if log[i].gseq > 0 {
				byGseq[log[i].gseq] = &log[i]
			}
		}
	}
	emitted := map[string]int{} // event id → boot that emitted it
	last := map[int]int64{}     // boot → gseq of its last emit
	for _, em := range l.Emits.Events {
		e := byID[em.ID]
		switch {
		case e == nil:
			ck.fail(em.Session, nil, RuleEmits, "boot %d emitted %s #%d (id %s), which is not in the log", em.Boot, em.Type, em.Seq, em.ID)
			continue
		case e.SessionID != em.Session || e.Seq != em.Seq || string(e.Type) != em.Type:
			ck.fail(e.SessionID, e, RuleEmits, "boot %d emitted id %s as %s #%d of %s", em.Boot, em.ID, em.Type, em.Seq, em.Session)
		}
		if b, twice := emitted[em.ID]; twice {
			ck.fail(e.SessionID, e, RuleEmits, "emitted twice: by boot %d, then by boot %d", b, em.Boot)
			continue
		}
		emitted[em.ID] = em.Boot
		if prev, ok := last[em.Boot]; ok && e.gseq <= prev {
			ck.fail(e.SessionID, e, RuleEmits, "boot %d emitted it (gseq %d) after an event it committed later (gseq %d): not in commit order", em.Boot, e.gseq, prev)
		}
		last[em.Boot] = max(last[em.Boot], e.gseq)
	}
	by := map[int64]int{} // gseq → boot that committed it, where known
	for _, c := range l.Emits.Commits {
		for g := c.From + 1; g <= c.To; g++ {
			by[g] = c.Boot
		}
	}
	for _, boot := range slices.Sorted(maps.Keys(last)) {
		upto := last[boot]
		for g := l.Emits.From[boot] + 1; g < upto; g++ {
			e := byGseq[g]
			if e == nil {
				continue
			}
			if b, ok := by[g]; ok && b != boot {
				continue // another instance's commit: owed by it, judged in its turn
			}
			if _, ok := emitted[e.ID]; !ok {
				ck.fail(e.SessionID, e, RuleEmits, "durable (gseq %d) but never reached emit, though boot %d, started at gseq %d, emitted gseq %d after it",
					g, boot, l.Emits.From[boot], upto)
			}
		}
	}
}
