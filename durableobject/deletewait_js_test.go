//go:build js && wasm

package durableobject

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
)

// deafDriver runs turns that ignore their cancellation (a tool that never
// looks at its context, say): each tells running as it starts and ends
// only when the test lets it go (release).
type deafDriver struct {
	running chan struct{}
	release chan struct{}
}

func (d deafDriver) Run(context.Context, *core.Execution) core.Outcome {
	d.running <- struct{}{}
	<-d.release
	return core.Outcome{Kind: core.Succeeded}
}

// A delete waits for the tree's turns to stop as long as an interrupt
// waits (the interrupt grace, at least minCloseWait: closeWait). A turn that ignores its
// cancellation may still write, so its tree's storage must not be
// deleted under it; and the delete must not wait for it for good either
// (its client would get no answer, the tree half deleted). The delete
// deletes nothing, answers 503 for the client to delete again, and gives
// the object up: its abort ends the turn, and the fresh object the next
// event gets deletes the tree. The alarm stays for the turns the close
// stopped with their claims.
func TestDeleteWhoseTurnDoesNotStopDeletesNothing(t *testing.T) {
	d := deafDriver{running: make(chan struct{}, 1), release: make(chan struct{})}
	o, storage := openedObjectWith(t, d)
	t.Cleanup(func() { close(d.release) }) // before the instance's Abandon
	o.closeWait = 10 * time.Millisecond    // a short wait
	createWithPrompt(t, o, "deaf to its cancellation")
	<-d.running

	w, answered := deleteInBackground(t, o)
	// A guard, not a wait for the answer: without the bound the delete
	// never answers, and the test would hang instead of failing.
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	select {
	case <-answered:
	case <-guard.C:
		t.Fatal("the delete never answered: it waits for good for a turn that ignores its cancellation")
	}

	assert.Equal(t, httpmsg.StatusServiceUnavailable, w.status, "%s", w.body.String())
	var body struct {
		Error struct{ Type string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(w.body.Bytes(), &body), "%s", w.body.String())
	assert.Equal(t, "unavailable", body.Error.Type)
	assert.Equal(t, "1", w.header.Get("Retry-After"))
	assert.Equal(t, "the tree's turns did not stop for its delete", o.bridge.Get("giveUp").String(), "a fresh object deletes the tree")
	assert.False(t, o.isDeleted())
	assert.NotContains(t, recordedCalls(storage), "deleteAll", "the storage was deleted under a turn that may still write it")
	assert.NotContains(t, recordedCalls(storage), "delete", "the alarm of the stopped turns' claims was deleted")
	assert.False(t, o.alarm.isCleared())
}

// An object given up waits for its answers in hand as long as the
// slowest may legitimately take: an interrupt waits the tree's interrupt
// grace for its turn, a delete as long (at least minCloseWait) for its
// turns, and each then writes. So the wait (set at boot for the shim,
// bridge.giveUpWaitMS) is the delete's wait and a margin, up to its cap;
// a grace the cap cannot cover is logged.
func TestGiveUpWaitCoversTheInterruptGrace(t *testing.T) {
	for _, c := range []struct {
		grace, close, want time.Duration
		warned             bool
	}{
		{0, 5 * time.Second, 10 * time.Second, false},
		{time.Nanosecond, 5 * time.Second, 10 * time.Second, false},
		{core.DefaultInterruptGrace, 5 * time.Second, 10 * time.Second, false},
		{8 * time.Second, 8 * time.Second, 13 * time.Second, false},
		{20 * time.Second, 20 * time.Second, 25 * time.Second, false},
		{21 * time.Second, 21 * time.Second, 25 * time.Second, true},
		{time.Minute, time.Minute, 25 * time.Second, true},
	} {
		t.Run(c.grace.String(), func(t *testing.T) {
			var log bytes.Buffer
			o := &Object{bridge: jsFunc(nil, `return {};`).Invoke(), log: logs.New(logs.NewTextHandler(&log, nil))}
			o.setWaits(core.NewConfig().WithInterruptGrace(c.grace))
			assert.Equal(t, c.want.Milliseconds(), int64(o.bridge.Get("giveUpWaitMS").Int()))
			assert.Equal(t, c.close, o.closeWait)
			assert.Equal(t, c.warned, bytes.Contains(log.Bytes(), []byte("interrupt_grace is longer than")), "%s", log.String())
		})
	}
}

// slowStopDriver runs turns that heed their cancellation, but not at
// once (a last step to finish, as a real turn has): each tells running as
// it starts, tells stopping once cancelled, and ends when the test lets
// it (release).
type slowStopDriver struct {
	running, stopping chan struct{}
	release           chan struct{}
}

func (d slowStopDriver) Run(ctx context.Context, _ *core.Execution) core.Outcome {
	d.running <- struct{}{}
	<-ctx.Done()
	d.stopping <- struct{}{}
	<-d.release
	return core.Outcome{Kind: core.Stopped}
}

// An interrupt_grace set to its least (100ms, for interrupts that barely
// wait; the file's 0 is the default) must not make a delete of a tree with a
// running turn fail: a turn that heeds its cancellation still needs a
// moment to stop, and a 503 there would come again on the fresh object,
// whose boot resumes the turn, for every delete after. So a delete waits
// at least minCloseWait whatever the grace.
func TestDeleteWaitsForACooperativeTurnWhateverTheGrace(t *testing.T) {
	d := slowStopDriver{running: make(chan struct{}, 1), stopping: make(chan struct{}, 1), release: make(chan struct{})}
	o, storage := openedObjectWith(t, d)
	o.setWaits(core.NewConfig().WithInterruptGrace(100 * time.Millisecond))
	createWithPrompt(t, o, "stops when asked")
	<-d.running

	w, answered := deleteInBackground(t, o)
	<-d.stopping
	close(d.release)
	<-answered
	assert.Equal(t, httpmsg.StatusNoContent, w.status, "%s", w.body.String())
	assert.Contains(t, recordedCalls(storage), "deleteAll")
	assert.True(t, o.isDeleted())
}

// createWithPrompt creates tree "root" through the front's route and
// admits a prompt to it, whose turn o's driver then runs.
func createWithPrompt(t *testing.T, o *Object, text string) {
	require.Equal(t, httpmsg.StatusCreated, serveFront(t, o, httpmsg.MethodPost).status)
	_, err := o.inst.Admit(context.Background(), "root", core.PromptInput{Text: text})
	require.NoError(t, err)
}

// deleteInBackground serves o the front's delete of tree "root" on a
// goroutine of its own: its answer is w once answered is closed.
func deleteInBackground(t *testing.T, o *Object) (w *answer, answered <-chan struct{}) {
	r := frontRequest(t, httpmsg.MethodDelete)
	w = &answer{header: httpmsg.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.ServeHTTP(w, r)
	}()
	return w, done
}
