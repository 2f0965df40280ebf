package recovery_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/recovery"
)

// A claim sleeping on a scheduled retry (DESIGN §6.5) sleeps until its
// time and then starts a new execution without counting an attempt. At
// exactly its time it starts: the wake-up armed for that time is the one
// that fires, and sleeping again would re-arm it for the same moment.
func TestScheduledRetryStartsAtItsTimeWithoutCounting(t *testing.T) {
	p := recovery.Policy{Budget: 3}
	c := core.ClaimState{SessionID: "s", ExecutionID: "x", Attempts: 2, RetryAt: 5_000}
	assert.Equal(t, core.Decision{Action: core.Sleep, At: 5_000}, p.Decide(c, 4_999), "before its time it sleeps")
	assert.Equal(t, core.Decision{Action: core.Start}, p.Decide(c, 5_000), "at its time it starts")
	assert.Equal(t, core.Decision{Action: core.Start}, p.Decide(c, 9_000), "past its time it starts, counting nothing")

	c.Attempts = 3 // the budget is spent: a scheduled retry still does not count
	assert.Equal(t, core.Decision{Action: core.Start}, p.Decide(c, 9_000))
}

// Decide skips a claim running here whatever else it says: Recover asks it
// about the claim as re-read under the lock, where the session may have
// started running since the sweep listed it.
func TestDecideSkipsAClaimRunningHere(t *testing.T) {
	p := recovery.Policy{Budget: 0, MaxClaimAge: 1}
	for name, c := range map[string]core.ClaimState{
		"never started":      {SessionID: "s", RunningHere: true},
		"past the budget":    {SessionID: "s", ExecutionID: "x", Attempts: 5, RunningHere: true},
		"older than the max": {SessionID: "s", ExecutionID: "x", ClaimedAt: 0, RunningHere: true},
		"orphan child":       {SessionID: "s.1", ParentID: "s", ExecutionID: "x", RunningHere: true},
	} {
		assert.Equal(t, core.Skip, p.Decide(c, 10_000).Action, name)
	}
}
