package check_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

func probe(t *testing.T, path string) *check.Probe {
	t.Helper()
	p, err := check.OpenProbe(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// A prompt left queued after its session's claim was released (a terminal
// that releases in one transaction and starts the next turn in another) is
// seen at that moment, though the final state of a later run hides it.
func TestProbeSeesAQueuedPromptWithoutClaim(t *testing.T) {
	path, _ := fixture(t)
	clean := probe(t, path)
	got, err := clean.Unclaimed()
	require.NoError(t, err)
	assert.Empty(t, got, "every prompt of the fixture has ended")

	p := copyTree(t, path)
	tamper(t, p, `UPDATE prompts SET state = 'queued' WHERE id = (SELECT id FROM prompts WHERE session_id = 's' ORDER BY admitted_seq DESC LIMIT 1)`)
	got, err = probe(t, p).Unclaimed()
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, check.RuleClaimed, got[0].Rule)
	assert.Equal(t, "s", got[0].Session)
	assert.Contains(t, got[0].Detail, "is queued but its session has no claim")

	// With its claim, it is runnable work.
	tamper(t, p, `INSERT INTO claims (session_id, claimed_at) VALUES ('s', 0)`)
	got, err = probe(t, p).Unclaimed()
	require.NoError(t, err)
	assert.Empty(t, got)
}

// A boot that returns with a claim whose execution is dead, not sleeping
// on a retry, and neither resumed, started nor ended in that boot deferred
// it: that is seen. A resumed one is reported as swept, a sleeping one is
// left alone.
func TestProbeSeesAClaimTheBootLeft(t *testing.T) {
	path, _ := fixture(t)
	end := queryInt(t, path, `SELECT MAX(gseq) FROM events`)
	now := queryInt(t, path, `SELECT MAX(at) FROM events`)

	p := copyTree(t, path)
	tamper(t, p, `INSERT INTO claims (session_id, execution_id, claimed_at) VALUES ('s', 'x-dead', 0)`)
	unswept, swept, err := probe(t, p).Unswept(end, now)
	require.NoError(t, err)
	require.Len(t, unswept, 1)
	assert.Equal(t, check.RuleBootResumes, unswept[0].Rule)
	assert.Contains(t, unswept[0].Detail, "execution x-dead is dead")
	assert.Empty(t, swept)

	// Sleeping on a retry still due: nothing to do yet.
	tamper(t, p, fmt.Sprintf(`UPDATE claims SET retry_at = %d`, now+1))
	unswept, _, err = probe(t, p).Unswept(end, now)
	require.NoError(t, err)
	assert.Empty(t, unswept)

	// Resumed in the boot.
	tamper(t, p, `UPDATE claims SET retry_at = NULL`, appendEvent("s", event.ExecutionStarted, `json_object('execution_id', 'x-new', 'cause', 'resume')`))
	unswept, swept, err = probe(t, p).Unswept(end, now)
	require.NoError(t, err)
	assert.Empty(t, unswept)
	assert.Equal(t, []string{"s"}, swept)
}

// A wake-up armed after a sleeping claim's retry is due, or more than one
// wake interval away while a claim is not sleeping, is seen; one armed at
// the earliest retry (and within the interval) is not.
func TestProbeSeesAWakeUpLaterThanARetry(t *testing.T) {
	path, _ := fixture(t)
	p := copyTree(t, path)
	tamper(t, p, `INSERT INTO claims (session_id, execution_id, claimed_at, retry_at) VALUES ('s', 'x1', 0, 5000), ('u', 'x2', 0, 3000)`)
	pr := probe(t, p)
	got, err := pr.WakeDue(3000, 1000, 10_000)
	require.NoError(t, err)
	assert.Empty(t, got, "armed at the earliest retry")
	got, err = pr.WakeDue(0, 1000, 10_000)
	require.NoError(t, err)
	assert.Empty(t, got, "none armed is claim-has-wake-up's to judge")
	got, err = pr.WakeDue(5000, 1000, 10_000)
	require.NoError(t, err)
	require.Len(t, got, 1, "armed at the latest retry")
	assert.Equal(t, check.RuleWakeDue, got[0].Rule)
	assert.Equal(t, "u", got[0].Session)
	assert.Contains(t, got[0].Detail, "after the claim's retry is due")

	tamper(t, p, `UPDATE claims SET retry_at = NULL WHERE session_id = 'u'`)
	got, err = probe(t, p).WakeDue(5000, 1000, 10_000)
	require.NoError(t, err)
	assert.Empty(t, got, "within the interval, at the retry")
	got, err = probe(t, p).WakeDue(4000, 1000, 2_000)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Detail, "more than the wake interval")
}

// A claim sleeping on a retry its own execution scheduled is fine; one
// whose execution scheduled none (a new turn that kept the sleep of the
// turn before it), or another time, is seen.
func TestProbeSeesASleepNotItsExecutions(t *testing.T) {
	path, _ := fixture(t)
	p := copyTree(t, path)
	tamper(t, p, `INSERT INTO claims (session_id, execution_id, claimed_at, retry_at) VALUES ('s', 'x1', 0, 5000)`)
	got, err := probe(t, p).StrayRetries()
	require.NoError(t, err)
	require.Len(t, got, 1, "no retry scheduled at all")
	assert.Equal(t, check.RuleRetryOwned, got[0].Rule)
	assert.Equal(t, "s", got[0].Session)
	assert.Contains(t, got[0].Detail, "sleeps until 5000, a retry its execution x1 never scheduled")

	tamper(t, p, appendEvent("s", event.RetryScheduled, `json_object('execution_id', 'x1', 'at', 5000, 'attempt', 1)`))
	got, err = probe(t, p).StrayRetries()
	require.NoError(t, err)
	assert.Empty(t, got, "its own execution's retry")

	for _, claim := range []string{
		`UPDATE claims SET execution_id = 'x2'`,                  // the next turn kept the sleep
		`UPDATE claims SET execution_id = 'x1', retry_at = 6000`, // another time than scheduled
		`UPDATE claims SET execution_id = NULL, retry_at = 5000`, // a claim kept for a queued turn
	} {
		tamper(t, p, claim)
		got, err = probe(t, p).StrayRetries()
		require.NoError(t, err)
		assert.Len(t, got, 1, claim)
	}
	tamper(t, p, `UPDATE claims SET execution_id = 'x1', retry_at = NULL`)
	got, err = probe(t, p).StrayRetries()
	require.NoError(t, err)
	assert.Empty(t, got, "not sleeping")
}
