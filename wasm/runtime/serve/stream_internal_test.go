package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/fakehost"
	"github.com/revenantrt/revenant/wasm/abi"
)

// chunk is one 64 KiB body part, as the guest's writer sends them.
func chunk() abi.ResponsePart {
	return abi.ResponsePart{Kind: abi.PartBody, Body: make([]byte, 64<<10)}
}

// A stream whose writer takes nothing is cut once more than maxBacklog
// waits and nothing was taken for backlogPatience: its parts are dropped,
// it ends, the guest's request is cancelled, and what the guest sends
// later is not kept.
func TestStreamBacklogCut(t *testing.T) {
	clock := fakehost.NewClock(1_700_000_000_000)
	cut := make(chan struct{}, 1)
	s := newStream(clock, func() { cut <- struct{}{} }, nil)
	s.push(abi.ResponsePart{Kind: abi.PartHead, Status: 200})
	for range 3 * maxBacklog / (64 << 10) {
		s.push(chunk())
	}
	require.Equal(t, 3<<20, s.buffered(), "three times the 1 MiB docs/api.md allows")

	require.Equal(t, 1, clock.Pending(), "the backlog timer, armed by the push")
	// The patience docs/api.md gives a client: 10 s of nothing taken.
	clock.Advance(10*time.Second - time.Millisecond)
	require.Equal(t, 1, clock.Pending(), "not yet due")
	require.Empty(t, cut, "not yet due")
	clock.Advance(time.Millisecond)
	select {
	case <-cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream was not cut")
	}
	require.Zero(t, s.buffered())
	s.mu.Lock()
	require.Nil(t, s.parts, "the parts are dropped")
	s.mu.Unlock()
	_, ok, done := s.next()
	require.False(t, ok)
	require.True(t, done, "the stream ends")
	s.push(chunk())
	require.Zero(t, s.buffered(), "nothing is kept after the cut")
}

// The rule is also applied as parts arrive: a part pushed once the
// patience ran out cuts at once.
func TestStreamBacklogCutOnPush(t *testing.T) {
	clock := fakehost.NewClock(1_700_000_000_000)
	cut := make(chan struct{}, 1)
	s := newStream(clock, func() { cut <- struct{}{} }, nil)
	s.push(chunk())
	clock.Advance(backlogPatience) // no timer yet: the backlog is small
	for range maxBacklog / (64 << 10) {
		s.push(chunk())
	}
	select {
	case <-cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream was not cut")
	}
	_, _, done := s.next()
	require.True(t, done)
}

// A slow client that keeps taking parts is never cut, however large its
// backlog and however long it takes; every byte reaches it.
func TestStreamSlowReaderNotCut(t *testing.T) {
	clock := fakehost.NewClock(1_700_000_000_000)
	s := newStream(clock, func() { t.Error("a reading client's stream was cut") }, nil)
	s.push(abi.ResponsePart{Kind: abi.PartHead, Status: 200})
	n := 4 * maxBacklog / (64 << 10)
	for range n {
		s.push(chunk())
	}
	s.push(abi.ResponsePart{Kind: abi.PartEnd})
	got := 0
	for {
		p, ok, done := s.next()
		if done {
			break
		}
		require.True(t, ok)
		clock.Advance(backlogPatience - time.Second) // each write takes long
		s.wrote(len(p.Body))
		got += len(p.Body)
	}
	require.Equal(t, n*(64<<10), got, "every part was written")
	require.Zero(t, s.buffered())
	s.close()
	require.Zero(t, clock.Pending(), "no timer is left")
}

// A drain part is answered when the writer reaches it: everything before
// it was written. Its timer is then stopped.
func TestStreamDrainAnsweredWhenWritten(t *testing.T) {
	clock := fakehost.NewClock(1_700_000_000_000)
	s := newStream(clock, func() { t.Error("cut") }, func(uint64) { t.Error("answered early") })
	s.push(abi.ResponsePart{Kind: abi.PartHead, Status: 200})
	for range 8 {
		s.push(chunk())
	}
	s.push(abi.ResponsePart{Kind: abi.PartDrain, Timer: 7})
	require.Equal(t, 1, clock.Pending(), "a drain waits: its patience is timed")
	for {
		p, ok, _ := s.next()
		require.True(t, ok)
		if p.Kind == abi.PartDrain {
			require.Equal(t, uint64(7), p.Timer)
			require.True(t, s.drained(p.Timer), "the writer answers it")
			break
		}
		s.wrote(len(p.Body))
	}
	require.False(t, s.drained(7), "once")
	require.Zero(t, clock.Pending(), "the timer is stopped")
}

// A drain part whose client takes nothing for the patience is answered all
// the same (the guest's catch-up goes on), and is then skipped by the
// writer; what the guest sends next past maxBacklog cuts the stream at
// once.
func TestStreamDrainAnsweredEarly(t *testing.T) {
	clock := fakehost.NewClock(1_700_000_000_000)
	cut := make(chan struct{}, 1)
	answered := make(chan uint64, 1)
	s := newStream(clock, func() { cut <- struct{}{} }, func(timer uint64) { answered <- timer })
	s.push(abi.ResponsePart{Kind: abi.PartHead, Status: 200})
	for range 8 {
		s.push(chunk())
	}
	s.push(abi.ResponsePart{Kind: abi.PartDrain, Timer: 7})
	answerEarly(t, clock, answered, 7)
	require.False(t, s.drained(7), "answered already")
	s.mu.Lock()
	for _, p := range s.parts {
		require.NotEqual(t, abi.PartDrain, p.Kind, "the answered part is gone")
	}
	s.mu.Unlock()
	require.Empty(t, cut)

	for range maxBacklog / (64 << 10) {
		s.push(chunk()) // the next page
	}
	select {
	case <-cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream was not cut")
	}
	require.Zero(t, s.buffered())
}

// The limit is exact: a backlog of maxBacklog bytes is within it (no
// patience is timed, nothing is cut), one byte more is over it.
func TestStreamBacklogLimitIsExact(t *testing.T) {
	clock := fakehost.NewClock(1_700_000_000_000)
	cut := make(chan struct{}, 1)
	s := newStream(clock, func() { cut <- struct{}{} }, nil)
	for range maxBacklog / (64 << 10) {
		s.push(chunk())
	}
	require.Equal(t, maxBacklog, s.buffered())
	require.Zero(t, clock.Pending(), "at the limit: nothing timed")
	clock.Advance(2 * backlogPatience)
	require.Empty(t, cut)

	s.push(abi.ResponsePart{Kind: abi.PartBody, Body: []byte{'x'}})
	select {
	case <-cut: // the patience ran out long ago: cut at once
	case <-time.After(30 * time.Second):
		t.Fatal("one byte over the limit, the stalled stream was not cut")
	}
}

// The writer's drain part answers only the drain the stream waits on: one
// answered early (its client took nothing for the patience) and then
// reached by the writer, after the guest sent the next, is not taken for
// the next, which would then never be answered.
func TestStreamStaleDrainAnswersNothing(t *testing.T) {
	clock := fakehost.NewClock(1_700_000_000_000)
	answered := make(chan uint64, 2)
	s := newStream(clock, func() { t.Error("cut") }, func(timer uint64) { answered <- timer })
	s.push(abi.ResponsePart{Kind: abi.PartHead, Status: 200})
	s.push(abi.ResponsePart{Kind: abi.PartDrain, Timer: 7})
	answerEarly(t, clock, answered, 7)
	s.push(abi.ResponsePart{Kind: abi.PartDrain, Timer: 8}) // the guest's next page ends in its next drain

	require.False(t, s.drained(7), "a writer late with 7 answers nothing")
	require.True(t, s.drained(8), "8 is still waited on")
}

// answerEarly lets the patience of the drain just pushed run out and
// waits for the stream to answer it (timer) without the writer.
func answerEarly(t *testing.T, clock *fakehost.Clock, answered <-chan uint64, timer uint64) {
	t.Helper()
	require.Equal(t, 1, clock.Pending(), "the drain's patience, armed by the push")
	clock.Advance(backlogPatience)
	select {
	case got := <-answered:
		require.Equal(t, timer, got)
	case <-time.After(30 * time.Second):
		t.Fatal("the drain was not answered")
	}
}
