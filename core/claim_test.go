package core

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/schema"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
)

// claimDB returns a runner of fn on the claims table of a fresh, migrated database, one
// transaction per call.
func claimDB(t *testing.T) func(fn func(c claimTable)) {
	t.Helper()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "claims.db"), sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, schema.Migrate(t.Context(), db, 1))
	return func(fn func(c claimTable)) {
		t.Helper()
		require.NoError(t, db.Tx(t.Context(), func(tx storage.Tx) error {
			fn(claimTable{tx})
			return nil
		}))
	}
}

// readClaim is the claim as a snapshot shows it, with the execution id from
// the statement the admission path reads.
func readClaim(t *testing.T, c claimTable, sessionID string) *ClaimInfo {
	t.Helper()
	info, err := c.info(sessionID)
	require.NoError(t, err)
	execID, found, err := c.execution(sessionID)
	require.NoError(t, err)
	held, err := c.held(sessionID)
	require.NoError(t, err)
	assert.Equal(t, info != nil, found, "execution() and info() agree on the claim")
	assert.Equal(t, info != nil, held, "held() and info() agree on the claim")
	if info != nil {
		assert.Equal(t, info.ExecutionID, execID)
		var n int
		require.NoError(t, c.attempts(sessionID, &n))
		assert.Equal(t, info.ResumeAttempts, n)
	}
	return info
}

// The claim's life (DESIGN §6): taken once at admission, taken afresh by
// each new turn and by the wait for a queued one, kept with its count by a
// continuing execution, and gone on release.
func TestClaimLifecycle(t *testing.T) {
	tx := claimDB(t)
	tx(func(c claimTable) {
		assert.Nil(t, readClaim(t, c, "s"))

		taken, err := c.take("s", 100)
		require.NoError(t, err)
		assert.True(t, taken)
		taken, err = c.take("s", 150)
		require.NoError(t, err)
		assert.False(t, taken, "a second admission finds the claim taken")
		assert.Equal(t, &ClaimInfo{ClaimedAt: 100}, readClaim(t, c, "s"))

		require.NoError(t, c.countAttempt("s", 3))
		require.NoError(t, c.sleepUntil("s", 900))
		require.NoError(t, c.startTurn("s", "x1", 200))
		assert.Equal(t, &ClaimInfo{ExecutionID: "x1", ClaimedAt: 200}, readClaim(t, c, "s"),
			"a new turn takes the claim afresh: no count, no retry, claimed now")

		require.NoError(t, c.countAttempt("s", 2))
		require.NoError(t, c.sleepUntil("s", 500))
		assert.Equal(t, &ClaimInfo{ExecutionID: "x1", ClaimedAt: 200, ResumeAttempts: 2, RetryAt: 500}, readClaim(t, c, "s"))
		require.NoError(t, c.attach("s", "x2"))
		assert.Equal(t, &ClaimInfo{ExecutionID: "x2", ClaimedAt: 200, ResumeAttempts: 2}, readClaim(t, c, "s"),
			"a continuing execution keeps the turn's age and count and ends its sleep")

		require.NoError(t, c.resetAttempts("s"))
		assert.Equal(t, 0, readClaim(t, c, "s").ResumeAttempts)

		require.NoError(t, c.countAttempt("s", 4))
		require.NoError(t, c.sleepUntil("s", 900))
		require.NoError(t, c.retake("s", 300))
		assert.Equal(t, &ClaimInfo{ClaimedAt: 300}, readClaim(t, c, "s"),
			"kept for a queued turn: afresh and without an execution")

		require.NoError(t, c.release("s"))
		assert.Nil(t, readClaim(t, c, "s"))
		require.NoError(t, c.release("s"), "releasing no claim is not an error")
	})
}

// startTurn takes the claim if the session had none: it is an upsert, so a
// new turn never depends on who wrote the claim before it.
func TestClaimStartTurnTakesAMissingClaim(t *testing.T) {
	tx := claimDB(t)
	tx(func(c claimTable) {
		require.NoError(t, c.startTurn("s", "x1", 100))
		assert.Equal(t, &ClaimInfo{ExecutionID: "x1", ClaimedAt: 100}, readClaim(t, c, "s"))
	})
}

// The reads recovery, the fence and the wake-up use see the same rows.
func TestClaimReadsForRecoveryFenceAndWakeUp(t *testing.T) {
	tx := claimDB(t)
	tx(func(c claimTable) {
		var others int
		var retry sql.NullInt64
		require.NoError(t, c.wakes(0, &others, &retry))
		assert.Zero(t, others)
		assert.False(t, retry.Valid)

		_, err := c.take("young", 300)
		require.NoError(t, err)
		require.NoError(t, c.startTurn("old", "x-old", 100))
		require.NoError(t, c.countAttempt("old", 1))
		require.NoError(t, c.startTurn("sleepy", "x-sleepy", 200))
		require.NoError(t, c.sleepUntil("sleepy", 700))

		list, err := c.list()
		require.NoError(t, err)
		assert.Equal(t, []ClaimState{
			{SessionID: "old", ExecutionID: "x-old", ClaimedAt: 100, Attempts: 1},
			{SessionID: "sleepy", ExecutionID: "x-sleepy", ClaimedAt: 200, RetryAt: 700},
			{SessionID: "young", ClaimedAt: 300},
		}, list, "oldest claim first")

		cs, found, err := c.state("sleepy")
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, list[1], cs)
		_, found, err = c.state("nobody")
		require.NoError(t, err)
		assert.False(t, found)

		require.NoError(t, c.wakes(699, &others, &retry))
		assert.Equal(t, 2, others, "claims not sleeping on a retry")
		assert.Equal(t, int64(700), retry.Int64)
		require.NoError(t, c.wakes(700, &others, &retry))
		assert.Equal(t, 3, others, "a retry due and not started counts with the claims not sleeping")
		assert.False(t, retry.Valid, "no retry ahead")

		epoch, execID, held, err := c.fence("old")
		require.NoError(t, err)
		assert.Equal(t, int64(0), epoch)
		assert.Equal(t, "x-old", execID)
		assert.True(t, held)
		_, execID, held, err = c.fence("nobody")
		require.NoError(t, err)
		assert.Empty(t, execID)
		assert.False(t, held)
	})
}
