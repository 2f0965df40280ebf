package core_test

// More interleavings of the late interrupt (lateinterrupt_test.go): an
// interrupt that answered its error while the execution it told to stop
// records the interrupt itself later.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

// lastSeqQuery is the read of a session's last seq: every append's, and
// the one an interrupt that gives up makes for its cutoff.
const lastSeqQuery = `SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?`

// An outage in which storage cannot even tell the session's last seq: the
// interrupt gives up, and so does its read of the cutoff. The execution's
// late record must still spare the prompt the client sent after the 503,
// though nothing says which prompts came before it: it cancels none.
func TestLateInterruptWithTheSeqUnreadableKeepsAPromptSentAfterIts503(t *testing.T) {
	tr := treetest.New(t)
	faults := &failQuery{match: func(q string) bool { return q == lastSeqQuery }}
	tr.WrapDB = func(db storage.DB) storage.DB { faults.DB = db; return faults }
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	var after string
	_, running, queued, _ := lateInterruptOn(t, tr, n, d,
		func() { faults.failNext(1<<30, &storage.Error{Code: storage.CodeIOErr, Msg: "injected"}) },
		func() { faults.failNext(0, nil) },
		func(n *treetest.Node, sid string) { after = n.Admit(sid, "sent after the interrupt's 503") })
	n.IdleDriving()

	assert.Equal(t, "interrupted", tr.PromptState(running), "the execution told to stop recorded the interrupt")
	assert.Equal(t, "succeeded", tr.PromptState(after), "admitted after the interrupt answered: kept, and run")
	assert.Equal(t, "succeeded", tr.PromptState(queued), "nothing told the record it was queued before the 503")
	require.Equal(t, 3, d.Runs())
}
