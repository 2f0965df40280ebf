package sim

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/wasm/runtime"
	"github.com/revenantrt/revenant/wasm/sim/check"
)

// overtakeSetup is a tree with a prompt out (waiting for a full disk, say)
// when its client sends the DELETE: the prompt's request and the tree.
func overtakeSetup(t *testing.T) (*tree, *request) {
	t.Helper()
	tr := &tree{del: &deleter{}, reqs: map[uint64]*request{}}
	g := &guest{t: tr, boot: 1}
	tr.now = 100
	prompt := &request{a: action{kind: actPrompt}, req: runtime.Request{Method: http.MethodPost, Path: "/v1/sessions/s/prompt"}}
	tr.noteSent(prompt, g)
	tr.reqs[1] = prompt
	tr.now = 200
	tr.noteSent(&request{a: action{kind: actDelete}}, g)
	require.NotNil(t, tr.ledger.Delete)
	return tr, prompt
}

// A request still out when the DELETE is sent, which the delete overtakes
// (docs/api.md: its tree closed under it, it is 404 once the delete is
// done), may be answered 404 once the delete committed: the client is done
// with it, and the checker finds nothing wrong. Seed 2494 (-diskfull 1
// -deletes 0.5) met this: two prompts waiting for the full disk, the
// DELETE's 204, then their 404s, which the client took for a tree that
// answered 404 while there.
func TestARequestTheDeleteOvertookMayBe404OnceItCommitted(t *testing.T) {
	tr, prompt := overtakeSetup(t)
	tr.del.committed = true
	prompt.status = http.StatusNotFound
	assert.True(t, tr.onDeleteAnswer(prompt), "the client is done with a 404 the delete explains")

	l := tr.ledger.Delete
	require.Len(t, l.Requests, 1)
	assert.Equal(t, check.AfterDelete{At: 200, Route: "POST /v1/sessions/s/prompt", Overtaken: true, Status: http.StatusNotFound, CommittedByAnswer: true, SaysGone: true}, l.Requests[0])
	vs, err := check.DeleteRules(t.TempDir()+"/gone.db", &tr.ledger, "t")
	require.NoError(t, err)
	for _, v := range vs {
		assert.NotContains(t, v.Detail, "prompt", "the overtaken prompt's 404 is judged wrong: %v", v)
	}
}

// The same request answered 404 while no delete has committed is a tree
// still there answered as gone: delete-answer-true.
func TestARequestAnswered404BeforeTheDeleteCommittedIsAViolation(t *testing.T) {
	tr, prompt := overtakeSetup(t)
	prompt.status = http.StatusNotFound
	tr.onDeleteAnswer(prompt)
	vs, err := check.DeleteRules(t.TempDir()+"/gone.db", &tr.ledger, "t")
	require.NoError(t, err)
	var found bool
	for _, v := range vs {
		if v.Rule == check.RuleDeleteAnswer && strings.Contains(v.Detail, "POST /v1/sessions/s/prompt") {
			found = true
		}
	}
	assert.True(t, found, "no delete-answer-true for a 404 before any commit: %v", vs)
}
