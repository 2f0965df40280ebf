package recovery

import (
	"fmt"

	"github.com/revenantrt/revenant/core"
)

// Policy is the recovery policy of an instance, read from its config.
type Policy struct {
	Budget      int   // resumes without progress allowed; the next count aborts
	MaxClaimAge int64 // ms; 0 turns the age check off
}

// PolicyOf returns the policy configured on inst.
func PolicyOf(inst *core.Instance) Policy {
	cfg := inst.Config()
	return Policy{Budget: cfg.ResumeBudget(), MaxClaimAge: cfg.MaxClaimAge().Milliseconds()}
}

// Decide is DESIGN §6.5 for one claim at time now. It is pure: the same
// claim and time always give the same decision.
func (p Policy) Decide(c core.ClaimState, now int64) core.Decision {
	switch {
	case c.RunningHere:
		return core.Decision{Action: core.Skip}
	case c.ParentID != "" && !c.JobLive && !c.OwnTurn:
		// A child's task turn runs only while a live job or a waiting call
		// of its parent names it (a child continuing from its own
		// question's reply included); anything else is an orphan and must
		// not be resumed (DESIGN §10). A turn of the child's own (a prompt
		// a client sent it) is no parent's to orphan: it is recovered like
		// a root's, on the child's own budget.
		return core.Decision{Action: core.Release}
	case c.ParentID == "" && p.MaxClaimAge > 0 && now-c.ClaimedAt > p.MaxClaimAge:
		return core.Decision{Action: core.Abort, Message: fmt.Sprintf("The turn was abandoned: its claim is older than %d ms.", p.MaxClaimAge)}
	case c.ExecutionID == "":
		return core.Decision{Action: core.Start}
	case c.RetryAt != 0 && c.RetryAt > now:
		return core.Decision{Action: core.Sleep, At: c.RetryAt}
	case c.RetryAt != 0:
		return core.Decision{Action: core.Start}
	}
	attempt := c.Attempts + 1
	d := core.Decision{Action: core.Resume, Attempt: attempt}
	if attempt > p.Budget {
		d.Abort = true
		d.Message = fmt.Sprintf("The turn was abandoned after %d resumes without progress.", p.Budget)
	}
	return d
}
