package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A stream that follows its tree to the next instance catches up from the
// log first: what the new instance committed before the stream subscribed
// to it (here a whole turn) reaches the client though no event follows it.
// Live delivery alone would show the gap only at the next event, which an
// idle tree never sends.
func TestStreamFollowingToTheNextInstanceCatchesUpWhatItCommittedMeanwhile(t *testing.T) {
	d := treetest.NewDriver(1)
	d.Release() // turns answer at once
	f := newFixture(t, d, nil)
	id := f.client(t, "").create()
	frames, ready := make(chan frame, 256), make(chan error, 1)
	go follow(f.srv.URL+"/v1/sessions/"+id+"/events", http.Header{}, ready, frames)
	streaming(t, ready)

	// Holding the trees' lock keeps the stream from reaching the next
	// instance (its Next waits for the lock) until that instance has run
	// a whole turn.
	f.trees.mu.Lock()
	mt := f.trees.trees[id]
	require.NoError(t, mt.node.Inst.Close(context.Background()))
	mt.node = mt.tree.Boot(d)
	mt.node.Admit(id, "while the stream moves over")
	mt.node.Idle()
	f.trees.mu.Unlock()

	var types []string
	for fr := range frames { // follow stops at execution.succeeded
		types = append(types, fr.event)
	}
	assert.Contains(t, types, string(event.PromptAdmitted))
	assert.Contains(t, types, string(event.ExecutionSucceeded), "the turn the next instance ran reached the stream")
}
