package core_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// pauseKey marks the context of the request pauseDB pauses.
type pauseKey struct{}

// pauseDB pauses the marked request right after its first transaction
// (Admit's look for an earlier admission of its client id) until resumed.
type pauseDB struct {
	storage.DB
	once   sync.Once
	paused chan struct{}
	resume chan struct{}
}

func (p *pauseDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	err := p.DB.Tx(ctx, fn)
	if ctx.Value(pauseKey{}) != nil {
		p.once.Do(func() {
			close(p.paused)
			<-p.resume
		})
	}
	return err
}

// replaceDriver parks a turn whose prompt starts with "park" on one
// question and holds any other until it is cancelled.
type replaceDriver struct{ started chan string }

func (d replaceDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	d.started <- x.PromptID()
	if strings.HasPrefix(x.Prompt(), "park") {
		return core.Outcome{Kind: core.Parked, Park: &event.Parked{
			StepID: x.ID() + ".step", ExecutionID: x.ID(), PromptID: x.PromptID(),
			Blockers: []event.Blocker{{ID: "q-" + x.ID() + "-0", Kind: event.KindQuestion, CallID: x.ID() + ".call",
				Adapter: "question@1", Request: json.RawMessage(`{"question":"which?"}`)}},
		}}
	}
	<-ctx.Done()
	return core.Outcome{Kind: core.Stopped}
}

// retryResult is what a retried admission answered.
type retryResult struct {
	a   core.Admission
	err error
}

// pausedRetry admits in to session "s" with the request marked for p, and
// returns once it has paused: it looked for its client id and found
// nothing. Its answer comes on the channel after p.resume is closed.
func pausedRetry(inst *core.Instance, p *pauseDB, in core.PromptInput) <-chan retryResult {
	retried := make(chan retryResult, 1)
	go func() {
		ctx := context.WithValue(context.Background(), pauseKey{}, true)
		a, err := inst.Admit(ctx, "s", in)
		retried <- retryResult{a, err}
	}()
	<-p.paused
	return retried
}

// pausedTree boots a tree whose database pauses the request marked with
// pauseKey (pauseDB), on replaceDriver, with one session "s".
func pausedTree(t *testing.T) (*treetest.Tree, *pauseDB, replaceDriver, *core.Instance) {
	t.Helper()
	tr := treetest.New(t)
	host, _, _ := tr.Host()
	p := &pauseDB{DB: host.DB, paused: make(chan struct{}), resume: make(chan struct{})}
	host.DB = p
	d := replaceDriver{started: make(chan string, 4)}
	inst, _, err := recovery.Boot(context.Background(), host, tr.Cfg, d)
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	_, err = inst.CreateSession(context.Background(), core.NewSession{ID: "s", Principal: "p"})
	require.NoError(t, err)
	return tr, p, d, inst
}

// A client's retry of a replace prompt races its first delivery: the
// retry's first look for its id runs before the first delivery is
// admitted, its interrupt after that delivery's turn started (running
// here, or parked on a question). The retry must answer the first
// admission as its duplicate without interrupting it (docs/api.md: a
// retried replace does not interrupt anything again), and a retry with
// another body under the same id is a conflict that interrupts nothing.
func TestReplaceRetryDoesNotInterruptItsFirstDelivery(t *testing.T) {
	for _, tc := range []struct {
		name, text, retryText string
		conflict              bool
	}{
		{name: "running", text: "hold it", retryText: "hold it"},
		{name: "parked", text: "park it", retryText: "park it"},
		{name: "other body", text: "hold it", retryText: "hold that", conflict: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, p, d, inst := pausedTree(t)

			retried := pausedRetry(inst, p, core.PromptInput{ClientID: "X", Text: tc.retryText, Mode: event.ModeReplace})

			first, err := inst.Admit(context.Background(), "s", core.PromptInput{ClientID: "X", Text: tc.text, Mode: event.ModeReplace})
			require.NoError(t, err)
			require.Equal(t, first.PromptID, <-d.started)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only to fail instead of hanging
			defer cancel()
			if strings.HasPrefix(tc.text, "park") {
				require.NoError(t, inst.WaitIdle(ctx), "the first delivery's turn parks")
			}
			close(p.resume)

			var r retryResult
			select {
			case r = <-retried:
			case <-ctx.Done():
				t.Fatal("the retry never answered")
			}
			if tc.conflict {
				require.ErrorIs(t, r.err, core.ErrConflict)
			} else {
				require.NoError(t, r.err)
				assert.Equal(t, core.Admission{PromptID: first.PromptID, Duplicate: true}, r.a)
			}
			assert.Equal(t, "running", tr.PromptState(first.PromptID), "the first delivery's turn goes on")
			evs := tr.Events("s")
			assert.Empty(t, treetest.Terminals(evs), "nothing was interrupted")
			assert.Len(t, treetest.OfType(evs, event.PromptAdmitted), 1)
			assert.Empty(t, treetest.OfType(evs, event.QuestionCancelled))
		})
	}
}

// The same race for a queued prompt: a retry whose first look missed its
// first delivery (admitted meanwhile) must find it in the transaction that
// would admit it, and answer as its duplicate, or as a conflict if its
// body differs, never admit the prompt twice.
func TestQueuedRetryRacingItsFirstDeliveryIsItsDuplicate(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		t.Run(map[bool]string{false: "same body", true: "other body"}[conflict], func(t *testing.T) {
			tr, p, d, inst := pausedTree(t)

			retryText := "hold it"
			if conflict {
				retryText = "hold that"
			}
			retried := pausedRetry(inst, p, core.PromptInput{ClientID: "X", Text: retryText})

			first, err := inst.Admit(context.Background(), "s", core.PromptInput{ClientID: "X", Text: "hold it"})
			require.NoError(t, err)
			require.Equal(t, first.PromptID, <-d.started)
			close(p.resume)

			var r retryResult
			select {
			case r = <-retried:
			case <-time.After(30 * time.Second): // only to fail instead of hanging
				t.Fatal("the retry never answered")
			}
			if conflict {
				require.ErrorIs(t, r.err, core.ErrConflict)
			} else {
				require.NoError(t, r.err)
				assert.Equal(t, core.Admission{PromptID: first.PromptID, Duplicate: true}, r.a)
			}
			assert.Len(t, treetest.OfType(tr.Events("s"), event.PromptAdmitted), 1, "admitted once")
		})
	}
}
