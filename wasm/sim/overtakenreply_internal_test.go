package sim

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/wasm/runtime"
)

// overtakenReplySetup is a tree with a reply to a question out when its
// client sends the DELETE: the reply's request and the tree.
func overtakenReplySetup(t *testing.T) (*tree, *request) {
	t.Helper()
	tr := &tree{del: &deleter{}, reqs: map[uint64]*request{}}
	g := &guest{t: tr, boot: 1}
	tr.now = 100
	reply := &request{a: action{kind: actReply, reply: &replySpec{question: "q1", responseID: "r1"}},
		req: runtime.Request{Method: http.MethodPost, Path: "/v1/sessions/s/questions/q1/reply"}}
	tr.noteSent(reply, g)
	tr.reqs[1] = reply
	tr.now = 200
	tr.noteSent(&request{a: action{kind: actDelete}}, g)
	return tr, reply
}

// A reply's 404 says the tree is gone only once a delete committed; before
// that it says the question is not there, which the replies' own rule
// judges (a question asked before the reply was sent is never 404). So a
// reply the DELETE overtook, answered 404 while no delete had committed,
// goes on to be recorded as a reply (onReply): the delete's bookkeeping
// must not end it there, or no rule ever judges that 404. Once a delete
// committed, the 404 is the delete's, and the client is done with it.
func TestAReplyAnswered404BeforeTheDeleteCommittedIsJudgedAsAReply(t *testing.T) {
	tr, reply := overtakenReplySetup(t)
	reply.status = http.StatusNotFound
	assert.False(t, tr.onDeleteAnswer(reply), "no delete committed: the reply's 404 is left to the replies' rule")

	tr, reply = overtakenReplySetup(t)
	tr.del.committed = true
	reply.status = http.StatusNotFound
	assert.True(t, tr.onDeleteAnswer(reply), "a delete committed: the 404 is the delete's")
}
