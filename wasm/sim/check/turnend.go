package check

import "github.com/revenantrt/revenant/core/event"

// settledBefore: every tool call of a completed step of the turn has
// settled before what e is (the next step starting, the turn's end) is
// written. A call left open would be run or settled after the model has
// already gone on without its result.
func (ck *checker) settledBefore(sid string, e *rec, tr *turn, what string) {
	for _, c := range tr.calls {
		if c.settled == nil {
			ck.fail(sid, e, RuleSettled, "%s while call %s (%s, step completed at #%d) has not settled", what, c.id, c.name, c.completedSeq)
			return
		}
	}
}

// endRules judges a turn's end e against what is pending in the turn.
//
// A turn that succeeds or fails on its own (not aborted by recovery, not
// ended for lost storage, both of which may cut a call short) has settled
// every call its steps asked for.
//
// A turn is aborted for its budget only by the count past it: a resume
// counted within the budget and not yet started must start its execution,
// not give the turn up. (Aborting at the budget's last attempt, or one
// early, leaves exactly that.)
func (ck *checker) endRules(sid string, e *rec, tr *turn) {
	switch {
	case e.Type == event.ExecutionSucceeded,
		e.Type == event.ExecutionFailed && e.p.Kind != event.FailAborted && e.p.Kind != event.FailStorage:
		ck.settledBefore(sid, e, tr, "the turn ends "+endName(*e))
	}
	if e.Type == event.ExecutionFailed && e.p.Kind == event.FailAborted && tr.pending != nil {
		ck.fail(sid, e, RuleBudget, "the turn is aborted while resume #%d (attempt %d, within the budget of %d) is pending",
			tr.pending.Seq, tr.pending.p.Attempt, ck.opts.Budget)
	}
}

// observed reports the violations the host saw while the tree ran.
func (ck *checker) observed(l *Ledger) {
	for _, o := range l.Observed {
		ck.fail(o.Session, nil, o.Rule, "at %d, boot %d: %s", o.At, o.Boot, o.Detail)
	}
}
