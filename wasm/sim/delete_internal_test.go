package sim

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/runtime"
)

// A request sent once the delete committed is judged by deleted-stays-gone
// (AfterCommit) whether or not its client has seen a DELETE answered yet:
// a kill just after the delete's commit loses the answer, and the client's
// requests until its next DELETE's answer meet the deleted tree too. One
// sent before the commit is not.
func TestRequestsSentAfterTheDeleteCommittedAreJudgedAsSuch(t *testing.T) {
	tr := &tree{del: &deleter{}}
	g := &guest{t: tr, boot: 1}
	prompt := func() *request {
		return &request{a: action{kind: actPrompt}, req: runtime.Request{Method: http.MethodPost, Path: "/v1/sessions/s/prompt"}}
	}
	tr.now = 100
	tr.noteSent(&request{a: action{kind: actDelete}}, g)
	tr.now = 150
	tr.noteSent(prompt(), g) // the delete not committed yet
	tr.del.committed = true  // as afterCommit sees it; the DELETE's answer lost
	tr.now = 200
	tr.noteSent(prompt(), g)

	l := tr.ledger.Delete
	require.NotNil(t, l)
	require.Len(t, l.Requests, 2)
	assert.False(t, l.Requests[0].AfterCommit, "sent before the commit")
	assert.True(t, l.Requests[1].AfterCommit, "sent after the commit, before any DELETE was answered")
}

// A wake-up armed once the delete committed and its DELETE was answered
// breaks deleted-stays-gone when the tree's own instance arms it; a
// zombie's arm is left to the boot it causes, which must find nothing.
// Before any DELETE was answered 204 or 404 (its commit durable but
// reported failed) the instance rightly takes the tree for still there.
func TestWakeArmedAfterTheDeleteIsJudgedUnlessAZombiesArm(t *testing.T) {
	tr := &tree{del: &deleter{committed: true}}
	tr.noteSent(&request{a: action{kind: actDelete}}, &guest{t: tr, boot: 2})
	tr.now = 300
	tr.noteWakeAfterDelete(&guest{t: tr, boot: 2}, 10300)
	require.NotNil(t, tr.ledger.Delete)
	assert.Empty(t, tr.ledger.Delete.WakeArms, "an arm before the DELETE's 204 or 404")
	tr.del.done = true
	tr.noteWakeAfterDelete(&guest{t: tr, boot: 1, zombie: true}, 10300)
	assert.Empty(t, tr.ledger.Delete.WakeArms, "a zombie's arm")
	tr.noteWakeAfterDelete(&guest{t: tr, boot: 2}, 10300)
	assert.Len(t, tr.ledger.Delete.WakeArms, 1, "the tree's own instance's arm")
}
