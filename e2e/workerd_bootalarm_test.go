package e2e

import (
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerdBootKeepsTheStoredAlarm: the shim hands the boot the alarm
// already stored (ctx.storage.getAlarm), and the boot's re-arm keeps it
// when it is earlier (DESIGN §4 rule 3; durableobject.Alarm counts it as
// set). With wake_interval 10m, the claim of a turn killed mid-step armed
// the alarm 10 min after its admission; the boot after the restart (a
// client's read) re-arms for the claim 10 min after the boot, later. A
// boot handed no alarm (or ignoring it) moved the wake-up later by the
// time the object was down, and a retry armed earlier (a failed sweep's,
// a provider's) would come late the same way. Read with wrangler
// stopped, from workerd's own alarm table: no wait for an alarm.
func TestWorkerdBootKeepsTheStoredAlarm(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdTOML(t, "", `REVENANT_SETTINGS = { wake_interval = "10m" }`, "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.client(t)
	sid := s.create()
	st := s.follow(sid, 0)
	a := s.prompt(sid, "/sleep 30s\nlater")
	st.until("the sleeping step", forPrompt(typeStepStarted, a))
	st.close()
	w.kill(t)
	stored := w.treeAlarm(t)
	require.NotZero(t, stored, "the claim armed the alarm")

	w.start(t)
	s.snapshot(sid) // boots the tree's object, which resumes the turn
	w.kill(t)
	assert.Equal(t, stored, w.treeAlarm(t), "the boot kept the earlier alarm stored (ns)")
}

// treeAlarm is the one Tree object's alarm as workerd stores it (ns since
// the epoch; 0: none). Read with wrangler stopped.
func (w *workerd) treeAlarm(t *testing.T) int64 {
	t.Helper()
	conn, err := sqlite3.OpenFlags(filepath.Join(w.state, "v3", "do", "revenant-Tree", "metadata.sqlite"), sqlite3.OPEN_READONLY)
	require.NoError(t, err)
	defer conn.Close()
	stmt, _, err := conn.Prepare(`SELECT scheduled_time FROM _cf_ALARM`)
	require.NoError(t, err)
	defer stmt.Close()
	var at []int64
	for stmt.Step() {
		at = append(at, stmt.ColumnInt64(0))
	}
	require.NoError(t, stmt.Err())
	require.LessOrEqual(t, len(at), 1, "one Tree object")
	if len(at) == 0 {
		return 0
	}
	return at[0]
}
