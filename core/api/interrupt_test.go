package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/faultvfs"
	"github.com/revenantrt/revenant/internal/treetest"
)

// The interrupt commits even if the client disconnects while it waits
// (docs/api.md): the request's context is already cancelled when the
// interrupt's write meets a full disk and waits to retry, and the interrupt
// still lands once storage recovers.
func TestInterruptCommitsAfterClientDisconnects(t *testing.T) {
	f := newFixture(t, offlineRunner(t), nil)
	var fault *faultvfs.Fault
	f.trees.prepare = func(tr *treetest.Tree) { fault = tr.Faults() }
	c := f.client(t, "")
	id := c.create()
	require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":`+jsonString(choicePrompt)+`}`, nil))
	tree := f.trees.tree(id)
	tree.node.Idle()
	require.Len(t, c.listQuestions(id), 1, "the turn is parked on its question: no execution runs")

	fault.FailNext(1, faultvfs.Full)
	gone, cancel := context.WithCancel(context.Background())
	cancel() // the client has hung up before the interrupt's write retries
	req := httptest.NewRequest("POST", "/v1/sessions/"+id+"/interrupt", nil).WithContext(gone)
	rec := httptest.NewRecorder()
	waits := tree.tree.Drive(func() { nethttp.Handler(f.h).ServeHTTP(rec, req) })
	require.NotEmpty(t, waits, "the interrupt's write waited for storage")

	terms := treetest.Terminals(tree.tree.Events(id))
	require.Len(t, terms, 1, "the interrupt committed: %s", rec.Body)
	assert.Equal(t, event.ExecutionInterrupted, terms[0].Type)
	assert.False(t, tree.tree.Claim(id).Exists)
}
