package core_test

import (
	"context"
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
)

// A session holds at most the queue cap of prompts not ended (running and
// queued): one more is refused with ErrQueueFull and admits nothing, while
// a retry of an admitted prompt still answers its duplicate. A turn's end
// makes room, and a replace is admitted however full the queue was.
func TestQueueCapRefusesPromptsPastIt(t *testing.T) {
	ctx := context.Background()
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithQueueCap(2)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")

	running, err := n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "a", Text: "hold"})
	require.NoError(t, err)
	<-d.Started
	queued, err := n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "b", Text: "hold too"})
	require.NoError(t, err)

	_, err = n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "c", Text: "one more"})
	require.ErrorIs(t, err, core.ErrQueueFull)
	var ce *core.Error
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Msg, "2 prompts")
	_, err = n.Inst.Admit(ctx, sid, core.PromptInput{Text: "no id"})
	require.ErrorIs(t, err, core.ErrQueueFull)
	assert.Len(t, treetest.OfType(tr.Events(sid), event.PromptAdmitted), 2, "nothing admitted past the cap")

	for _, in := range []core.PromptInput{{ClientID: "a", Text: "hold"}, {ClientID: "b", Text: "hold too"}} {
		dup, err := n.Inst.Admit(ctx, sid, in)
		require.NoError(t, err, "a retry of %s answers its admission", in.ClientID)
		assert.True(t, dup.Duplicate)
	}
	assert.Equal(t, running.PromptID, must(n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "a", Text: "hold"})).PromptID)
	_, err = n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "b", Text: "another body"})
	require.ErrorIs(t, err, core.ErrConflict, "a reused id with another body is still a conflict")

	// The running turn ends: its successor runs, and one more fits.
	d.Release()
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(queued.PromptID))
	third, err := n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "c", Text: "hold three"})
	require.NoError(t, err, "room again")
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(third.PromptID))
}

// A replace empties the queue before it is admitted: a full queue does not
// refuse it.
func TestQueueCapAdmitsReplace(t *testing.T) {
	ctx := context.Background()
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithQueueCap(1)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	first := n.Admit(sid, "hold")
	<-d.Started
	_, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: "queued"})
	require.ErrorIs(t, err, core.ErrQueueFull)

	r, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: "instead", Mode: event.ModeReplace})
	require.NoError(t, err)
	n.Idle()
	assert.Equal(t, "interrupted", tr.PromptState(first))
	assert.Equal(t, "succeeded", tr.PromptState(r.PromptID))
}

// A background child's completion notice is admitted to its parent's
// queue however full it is: it must never be lost.
func TestQueueCapAdmitsNotices(t *testing.T) {
	ctx := context.Background()
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithQueueCap(1)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	root := n.NewSession("root")
	sub := n.Inst.Subscribe(root, 64)
	defer sub.Close()
	n.Admit(root, "hold")
	rx := <-d.Started
	_, err := rx.StartChild(ctx, core.ChildSpec{CallID: "call-1", Prompt: "answer at once", Background: true, MaxDepth: 3, MaxChildren: core.DefaultMaxSubagents})
	require.NoError(t, err)
	<-d.Started // the child's turn

	var notice string
	deadline := time.After(10 * time.Second) // bounds a failure only
	for notice == "" {
		select {
		case ev, ok := <-sub.C:
			require.True(t, ok, "the subscription fell behind")
			var a event.Admitted
			if ev.Type == event.PromptAdmitted && ev.Decode(&a) == nil && a.ClientID == core.NoticeClientID(root+".1", 1) {
				notice = a.PromptID
			}
		case <-deadline:
			t.Fatal("no notice admitted under the child's id for its first turn")
		}
	}
	assert.Equal(t, "queued", tr.PromptState(notice), "admitted behind the running turn, past the cap")
	d.Release()
	<-d.Started // the notice's turn
	n.Idle()
	assert.Equal(t, "succeeded", tr.PromptState(notice))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A retry that races its first delivery can miss it in Admit's first
// look (it ran before that delivery committed), and that delivery may
// have filled the queue: the retry's own transaction still answers it as
// the duplicate it is, not as one prompt too many, as its duplicate
// check comes before the cap.
func TestQueueCapAnswersARetryThatRacedItsFirstDelivery(t *testing.T) {
	ctx := context.Background()
	tr := treetest.New(t)
	tr.Cfg = tr.Cfg.WithQueueCap(2)
	look := &missQuery{match: func(q string) bool { return strings.Contains(q, "FROM prompts WHERE session_id = ? AND client_id = ?") }}
	tr.WrapDB = func(db storage.DB) storage.DB { look.DB = db; return look }
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	in := core.PromptInput{ClientID: "b", Text: "hold too"}
	first, err := n.Inst.Admit(ctx, sid, in)
	require.NoError(t, err)

	look.missNext(1) // the retry's first look, as if made before the first delivery committed
	retry, err := n.Inst.Admit(ctx, sid, in)
	require.NoError(t, err, "a retry of an admitted prompt answers its admission however full the queue is")
	assert.True(t, retry.Duplicate)
	assert.Equal(t, first.PromptID, retry.PromptID)
	assert.Zero(t, look.left(), "the first look missed")
	assert.Len(t, treetest.OfType(tr.Events(sid), event.PromptAdmitted), 2)
}

// missQuery makes the next matching queries find no row, as if they ran
// before whatever they would have found had committed.
type missQuery struct {
	storage.DB
	match func(query string) bool
	mu    sync.Mutex
	times int
}

func (m *missQuery) missNext(times int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.times = times
}

func (m *missQuery) left() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.times
}

func (m *missQuery) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	return m.DB.Tx(ctx, func(tx storage.Tx) error { return fn(&missQueryTx{Tx: tx, m: m}) })
}

type missQueryTx struct {
	storage.Tx
	m *missQuery
}

func (t *missQueryTx) Query(query string, args ...any) (*storage.Rows, error) {
	if t.m.match(query) {
		t.m.mu.Lock()
		miss := t.m.times > 0
		if miss {
			t.m.times--
		}
		t.m.mu.Unlock()
		if miss {
			return t.Tx.Query(query+" AND 0", args...)
		}
	}
	return t.Tx.Query(query, args...)
}
