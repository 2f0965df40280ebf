package check

import "github.com/revenantrt/revenant/core/event"

// RuleDeltas: a step whose answer streamed text, recorded complete by an
// instance that then went quiet (a call into it returned with every
// goroutine of the guest blocked), had at least one of its live deltas
// (session.text.delta@1) reach the host's emit from that instance.
//
// Why a correct guest owes it: a completed step's text was all streamed
// by the execution that recorded it (its checkpoints and completion are
// its own execution's, RuleSteps), which published a delta for every
// chunk with text before the completion's commit. Its session was
// watched by then: the instance's listing at boot watches it, and so does
// the commit of the event a turn starts or resumes with, before the
// model is asked; the model's answer comes in a later call, so the
// watch subscribed while the call that asked settled. A delta published
// to a subscription is emitted once its goroutine runs, at the latest
// before the guest is quiet again. An instance killed before that may
// never emit it, so only a quiet return after the completion's commit
// makes the delta owed. A subscription that falls behind (its buffer of
// 1024 events filled before its goroutine ran: wasm/guest watch) loses
// deltas, but never a step's first: at a quiet return every watch has
// drained its subscription, or subscribed again, and the step's first
// delta is the first event of its session published after one (the
// request to the model went out, and the guest went quiet waiting for the
// answer). So the rule holds there too. (Campaigns with -flood stream
// 1100 deltas of a step in one call and count the watches that fell
// behind: none did, even with a buffer of 2, as the step's goroutine
// waits for each chunk and the watch runs meanwhile.)
const RuleDeltas Rule = "deltas-reach-emit"

// Delta is the first live delta of a step an instance emitted.
type Delta struct {
	Boot    int    `json:"boot"`
	Session string `json:"session"`
	Step    string `json:"step"`
}

// deltas checks RuleDeltas. It needs to know which instance committed
// each completion (Emits.Commits) and when each went quiet
// (Emits.Settled); a ledger without them is not judged.
func (ck *checker) deltas(l *Ledger) {
	if l.Emits == nil || l.Emits.Settled == nil || l.Emits.Commits == nil {
		return
	}
	by := map[int64]int{} // gseq → boot that committed it
	for _, c := range l.Emits.Commits {
		for g := c.From + 1; g <= c.To; g++ {
			by[g] = c.Boot
		}
	}
	seen := map[Delta]bool{}
	for _, d := range l.Emits.Deltas {
		seen[d] = true
	}
	for _, sid := range ck.h.order {
		log := ck.h.logs[sid]
		for i := range log {
			e := &log[i]
			if e.Type != event.StepCompleted || e.p.Text == "" || e.gseq == 0 {
				continue
			}
			boot, ok := by[e.gseq]
			if !ok {
				continue
			}
			quiet, ok := l.Emits.Settled[boot]
			if !ok || quiet < e.gseq {
				continue // killed (or still busy) before its watch could run
			}
			if !seen[Delta{Boot: boot, Session: sid, Step: e.p.StepID}] {
				ck.fail(sid, e, RuleDeltas, "step %s streamed %d bytes of text and boot %d, which recorded it complete (gseq %d) and was quiet at gseq %d, emitted none of its deltas",
					e.p.StepID, len(e.p.Text), boot, e.gseq, quiet)
			}
		}
	}
}
