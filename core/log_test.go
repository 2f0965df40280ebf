package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
)

var ctx = context.Background()

func TestSeqContiguousPerSession(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(16)
	n := tr.Boot(d)
	a, b := n.NewSession("a"), n.NewSession("b")
	for range 3 {
		n.Admit(a, "x")
		n.Admit(b, "y")
	}
	n.Idle()
	for _, sid := range []string{a, b} {
		evs := tr.Events(sid)
		require.NotEmpty(t, evs)
		for i, e := range evs {
			assert.Equal(t, int64(i+1), e.Seq, "session %s", sid)
			assert.NotEmpty(t, e.ID)
			assert.Equal(t, int64(treetest.Start), e.At, "ms timestamps from the host clock")
		}
	}
}

// Subscribers hear of events only after the transaction commits: a commit
// hook running inside the append transaction never finds the event it is
// running for among those delivered so far.
func TestSubscribersHearOnlyAfterCommit(t *testing.T) {
	tr := treetest.New(t)
	var sub *core.Subscription
	var got []event.Event
	receive := func() {
		for len(sub.C) > 0 {
			got = append(got, <-sub.C)
		}
	}
	inside := 0
	tr.Cfg = tr.Cfg.WithCommitHook(func(tx storage.Tx, ev event.Event) error {
		if sub != nil {
			inside++
			receive()
			for _, g := range got {
				assert.NotEqual(t, ev.ID, g.ID, "%s delivered before its commit", ev.Type)
			}
		}
		return nil
	})
	d := treetest.NewDriver(4)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	sub = n.Inst.Subscribe(sid, 64)
	defer sub.Close()
	n.Admit(sid, "hi")
	n.Idle()
	receive()
	var types []event.Type
	for _, g := range got {
		types = append(types, g.Type)
	}
	assert.Equal(t, []event.Type{event.PromptAdmitted, event.ExecutionStarted, event.MessageAdded, event.MessageAdded, event.ExecutionSucceeded}, types)
	assert.Equal(t, len(got), inside)
}

// A commit hook that fails aborts the append: nothing of it is stored.
func TestCommitHookFailureAbortsAppend(t *testing.T) {
	tr := treetest.New(t)
	boom := errors.New("boom")
	tr.Cfg = tr.Cfg.WithCommitHook(func(tx storage.Tx, ev event.Event) error {
		if ev.Type == event.PromptAdmitted {
			return boom
		}
		return nil
	})
	n := tr.Boot(treetest.NewDriver(4))
	sid := n.NewSession("s")
	_, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: "x"})
	require.ErrorIs(t, err, boom)
	assert.Len(t, tr.Events(sid), 1, "only session.created")
	assert.False(t, tr.Claim(sid).Exists, "the claim rolled back with the event")
}

// A slow subscriber is cut off rather than blocking the writer; it catches
// up from its cursor.
func TestSlowSubscriberIsClosedNotBlocking(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(8))
	sid := n.NewSession("s")
	sub := n.Inst.Subscribe(sid, 1)
	n.Admit(sid, "a")
	n.Idle()
	// Everything was published before Idle returned: read without waiting,
	// so a subscriber left open fails here instead of hanging.
	got, open := 0, true
	for open {
		select {
		case _, open = <-sub.C:
			if open {
				got++
			}
		default:
			t.Fatalf("after %d events the subscriber that fell behind is still open", got)
		}
	}
	assert.Equal(t, 1, got, "one buffered event, then closed")
}

func TestAdmissionIdempotency(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	first, err := n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "c1", Text: "hello"})
	require.NoError(t, err)
	again, err := n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "c1", Text: "hello"})
	require.NoError(t, err)
	assert.Equal(t, first.PromptID, again.PromptID)
	assert.True(t, again.Duplicate)
	_, err = n.Inst.Admit(ctx, sid, core.PromptInput{ClientID: "c1", Text: "other"})
	require.ErrorIs(t, err, core.ErrConflict)
	// Without an id nothing is deduplicated.
	x, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: "hello"})
	require.NoError(t, err)
	y, err := n.Inst.Admit(ctx, sid, core.PromptInput{Text: "hello"})
	require.NoError(t, err)
	assert.NotEqual(t, x.PromptID, y.PromptID)
	n.Idle()
	assert.Len(t, treetest.OfType(tr.Events(sid), event.PromptAdmitted), 3)
}

func TestAdmissionRejectsBadInput(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(4))
	sid := n.NewSession("s")
	for _, in := range []core.PromptInput{{Text: ""}, {Text: "  \n"}, {Text: "x", Mode: "shout"}} {
		_, err := n.Inst.Admit(ctx, sid, in)
		assert.ErrorIs(t, err, core.ErrInvalid, "%+v", in)
	}
	_, err := n.Inst.Admit(ctx, "nope", core.PromptInput{Text: "x"})
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = n.Inst.Interrupt(ctx, "nope", event.ReasonUser)
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = n.Inst.CreateSession(ctx, core.NewSession{ID: "s"})
	assert.ErrorIs(t, err, core.ErrConflict)
	_, err = n.Inst.CreateSession(ctx, core.NewSession{ID: "c", ParentID: "nope"})
	assert.ErrorIs(t, err, core.ErrNotFound)
	_, err = n.Inst.CreateSession(ctx, core.NewSession{Config: json.RawMessage(`{`)})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Len(t, tr.Events(sid), 1)
}

// A child joins its parent's tree and principal, whatever principal its
// creator names: a tree belongs to one principal (DESIGN §11), so a child
// cannot be made someone else's.
func TestChildTakesItsParentsTreeAndPrincipal(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(1))
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "root", Principal: "alice"})
	require.NoError(t, err)
	child, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "root.1", ParentID: "root", Principal: "mallory"})
	require.NoError(t, err)
	grandchild, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "root.2", ParentID: "root.1"})
	require.NoError(t, err)
	for _, s := range []core.Session{child, grandchild} {
		assert.Equal(t, "root", s.RootID, s.ID)
		assert.Equal(t, "alice", s.Principal, s.ID)
	}
	assert.Equal(t, "root.1", grandchild.ParentID)
}

// Claim bookkeeping (starts, resumes, continuation notices, shutdown stops)
// never moves the session's updated_at; prompts, answers and terminals do.
func TestClaimBookkeepingDoesNotMoveUpdatedAt(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	tr.Clock.Advance(time.Second)
	n.Admit(sid, "hold")
	<-d.Started
	admittedAt := tr.Clock.Now()
	require.Equal(t, admittedAt, sessionRow(t, tr, sid).UpdatedAt, "an admission is a change")
	n.Crash()

	tr.Clock.Advance(time.Second)
	n = tr.Boot(d) // resumed{attempt}, notice, started
	<-d.Started
	require.NoError(t, n.Inst.Close(ctx)) // interrupted{shutdown}
	n.Crash()
	require.Len(t, treetest.OfType(tr.Events(sid), event.ExecutionResumed), 1)
	assert.Equal(t, admittedAt, sessionRow(t, tr, sid).UpdatedAt)

	tr.Clock.Advance(time.Second)
	d.Release()
	n = tr.Boot(d)
	n.Idle()
	assert.Equal(t, tr.Clock.Now(), sessionRow(t, tr, sid).UpdatedAt, "the answer and terminal are changes")
	assert.Equal(t, 1, sessionRow(t, tr, sid).Turns)
}

func sessionRow(t *testing.T, tr *treetest.Tree, id string) core.Session {
	var s core.Session
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT updated_at, turns FROM sessions WHERE id = ?`, []any{id}, &s.UpdatedAt, &s.Turns)
		return err
	})
	return s
}

// An instance abandoned (crashed) while a terminal commits writes nothing
// more: the next turn it started in that transaction is left for recovery,
// and no shutdown is recorded for it.
func TestAbandonDuringTerminalWritesNothingMore(t *testing.T) {
	tr := treetest.New(t)
	var n *treetest.Node
	abandoned := false
	tr.Cfg = tr.Cfg.WithCommitHook(func(tx storage.Tx, ev event.Event) error {
		if ev.Type == event.ExecutionSucceeded && !abandoned {
			abandoned = true
			n.Inst.Abandon()
		}
		return nil
	})
	d := treetest.NewDriver(8)
	n = tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	n.Admit(sid, "second")
	d.Release()
	n.Idle()
	evs := tr.Events(sid)
	last := evs[len(evs)-1]
	require.Equal(t, event.MessageAdded, last.Type, "the terminal's transaction ends the log")
	assert.Len(t, treetest.OfType(evs, event.ExecutionInterrupted), 0, "no shutdown recorded")
	assert.Len(t, treetest.OfType(evs, event.ExecutionSucceeded), 1)
	assert.True(t, tr.Claim(sid).Exists, "the started turn is left for recovery")
}

// Closing an instance ends its subscriptions even when the caller's context
// has already ended, so followers always learn the instance is gone.
func TestCloseWithEndedContextEndsSubscriptions(t *testing.T) {
	for range 20 {
		tr := treetest.New(t)
		n := tr.Boot(treetest.NewDriver(4))
		sid := n.NewSession("s")
		sub := n.Inst.Subscribe(sid, 4)
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, n.Inst.Close(ended), "an idle instance closes even with an ended context")
		_, open := <-sub.C
		assert.False(t, open)
	}
}

// A subscription asked of an instance that has stopped is ended at once:
// its follower must look for the tree's next instance, not wait on this one.
func TestSubscribeToAStoppedInstanceEndsAtOnce(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(4))
	sid := n.NewSession("s")
	require.NoError(t, n.Inst.Close(ctx))
	sub := n.Inst.Subscribe(sid, 4)
	select {
	case _, open := <-sub.C:
		assert.False(t, open)
	default:
		t.Fatal("a subscription to a stopped instance is open")
	}
}

// An abandoned instance (a crash, in process) writes nothing more, even
// before another instance boots and fences it: whatever its goroutines
// still try is refused with ErrClosed.
func TestAbandonedInstanceWritesNothing(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(4))
	sid := n.NewSession("s")
	n.Inst.Abandon()
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "other", Principal: "tester"})
	assert.ErrorIs(t, err, core.ErrClosed)
	_, err = n.Inst.Admit(ctx, sid, core.PromptInput{Text: "after the crash"})
	assert.ErrorIs(t, err, core.ErrClosed)
	assert.Len(t, tr.Events(sid), 1, "only session.created")
	var sessions int
	tr.Read(func(tx storage.Tx) error {
		_, err := storage.QueryRow(tx, `SELECT count(*) FROM sessions`, nil, &sessions)
		return err
	})
	assert.Equal(t, 1, sessions)
}

// A subscription asked for with no buffer, or a negative one (a library
// caller's mistake), holds one event: it neither panics (a negative
// channel size) nor closes at the first event (a buffer of none is always
// behind).
func TestSubscribeWithoutABufferHoldsOneEvent(t *testing.T) {
	for _, buffer := range []int{0, -1} {
		tr := treetest.New(t)
		n := tr.Boot(treetest.NewDriver(4))
		sid := n.NewSession("s")
		sub := n.Inst.Subscribe(sid, buffer)
		n.Admit(sid, "hi")
		ev, open := <-sub.C
		require.True(t, open, "buffer %d: closed at the first event", buffer)
		assert.Equal(t, sid, ev.SessionID)
		sub.Close()
		n.Idle()
	}
}
