package check

import (
	"sort"

	"github.com/revenantrt/revenant/core/event"
)

// RuleStartsHere: a claim an instance took while serving (a prompt it
// admitted, a reply it took that resolved a parked step's last blocker, a
// child's end that admitted a notice or resolved its parent's call, the
// end of a turn with a prompt queued behind it) starts its execution there
// and then, not at the instance's next wake-up. The wake-up (DESIGN §4) is
// the safety net for claims an instance could not start: its storage
// refused a write, it was killed or closed; an instance that lives on and
// whose storage takes every write has no reason to leave a claim idle
// until its wake handler sweeps it (up to a wake interval, 10 s by
// default). Nothing is lost, so no other rule sees it: the sweep starts
// the turn in time for every rule of quiescence, within the wake interval
// RuleWakeDue allows.
//
// Judged from the history's own order, not from its clock: an execution
// started (session.execution.started@1, any cause but retry: a claim
// asleep on a scheduled retry waits for the wake-up by design) within a
// delivery of the wake-up to the serving instance (Ledger.Wakes, which the
// host records with the commit positions around the delivery) is a
// violation when the session's event that took the claim was committed
// before that delivery began, by that same instance (Emits.Commits), and
// storage excuses nothing: it refused no write of the tree's from that
// event's transaction to the delivery (Commit.Refused, Wake.Refused: a
// start refused is given up to the wake-up, at once by a read-only
// instance), and it reported no commit failed though durable (a late
// IOERR: Late) in that stretch unless the instance had a timer set at the
// delivery (Wake.Waiting), and the commit that took the claim was not
// itself reported failed (Commit.Failed: a read-only instance tries a
// write once, so its Admit fails with the claim taken and durable, left
// to the wake-up). A commit reported failed delays only its own writer,
// by the wait before the rerun that finds it stored, and that wait is a
// timer: with none set, every such writer has gone on (and an Admit or a
// reply started the claim it took), while a claim taken during another
// record's wait (core's bug of abd5e07) waits for the wake-up. The
// event that took the claim is the session's latest before the start but
// the admissions of other prompts: those queue behind a claim already
// there, or a parked turn, and start nothing (a claim whose start storage
// refused is the wake-up's to start, however many prompts the client
// admits behind it meanwhile). A start the wake-up made after a session
// event the delivery itself wrote (a resume, an owed storage failure, an
// orphaned child's end) is the sweep's own work; one after an event of
// another instance (a boot since, a zombie) is the sweep's by design.
const RuleStartsHere Rule = "claim-starts-here"

// Wake is one delivery of a tree's wake-up to the instance serving it (the
// wake handler; a wake-up delivered as a boot, with no instance serving,
// is not one). From and To are the tree's commit positions (the highest
// events.gseq) when the delivery was made and when it returned (or its
// instance died in it): what the delivery committed lies in between.
type Wake struct {
	At   int64 `json:"at"`   // virtual ms
	Boot int   `json:"boot"` // the instance it was delivered to
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Refused counts the writes the tree's storage had refused, Late the
	// commits it had reported failed though durable (a late IOERR), when
	// the delivery was made, as Commit's do.
	Refused int `json:"refused,omitempty"`
	Late    int `json:"late,omitempty"`
	// Waiting says the instance had a timer set when the delivery was
	// made: a write may have been waiting to be tried again.
	Waiting bool `json:"waiting,omitempty"`
}

// startsHere judges RuleStartsHere. It needs the deliveries and the commits'
// attribution; without them it judges nothing.
func (ck *checker) startsHere(l *Ledger) {
	if len(l.Wakes) == 0 || l.Emits == nil || len(l.Emits.Commits) == 0 {
		return
	}
	commits := l.Emits.Commits
	// committer is the commit that made gseq g durable (nil: unknown).
	committer := func(g int64) *Commit {
		i := sort.Search(len(commits), func(i int) bool { return commits[i].To >= g })
		if i < len(commits) && commits[i].From < g && g <= commits[i].To {
			return &commits[i]
		}
		return nil
	}
	// during is the delivery that committed gseq g (nil: none).
	during := func(g int64) *Wake {
		for i := range l.Wakes {
			if w := &l.Wakes[i]; w.From < g && g <= w.To {
				return w
			}
		}
		return nil
	}
	for _, sid := range ck.h.order {
		log := ck.h.logs[sid]
		for i := 1; i < len(log); i++ {
			e := &log[i]
			if e.Type != event.ExecutionStarted || e.p.Cause == event.CauseRetry || e.gseq == 0 {
				continue
			}
			prev := claimedBy(log[:i], e)
			if prev == nil || prev.gseq == 0 {
				continue
			}
			w := during(e.gseq)
			if w == nil || prev.gseq > w.From {
				continue
			}
			by, took := committer(e.gseq), committer(prev.gseq)
			if by == nil || took == nil || by.Boot != w.Boot || took.Boot != w.Boot {
				continue
			}
			ck.res.WakeStarts++
			if took.Failed || w.Refused != took.Refused || (w.Late != took.Late && w.Waiting) {
				ck.res.WakeStartsFaulted++
				continue
			}
			ck.fail(sid, e, RuleStartsHere, "execution %s (cause %s) was started by the wake-up delivered at %d to boot %d (gseq %d…%d), though that instance committed the session's %s #%d (gseq %d) before it and lived on, storage excusing nothing since: the claim waited for the wake-up",
				e.p.ExecutionID, e.p.Cause, w.At, w.Boot, w.From, w.To, prev.Type, prev.Seq, prev.gseq)
		}
	}
}

// claimedBy is the latest event of before (a session's log up to start)
// that may have taken or handed on the claim start begins an execution
// for: any but the admission of another prompt, which queues behind a
// claim already there (or behind a parked turn) and starts nothing.
func claimedBy(before []rec, start *rec) *rec {
	for i := len(before) - 1; i >= 0; i-- {
		if e := &before[i]; e.Type != event.PromptAdmitted || e.p.PromptID == start.p.PromptID {
			return e
		}
	}
	return nil
}
