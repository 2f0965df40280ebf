package serve

import (
	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// SetRequest replaces how the tree delivers requests to its guest (nil:
// Guest.Request).
func SetRequest(t *Tree, f func(g *runtime.Guest, id uint64, req runtime.Request) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.request = f
}

// Generation is how many guests the tree has booted.
func Generation(t *Tree) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

// Requests is how many requests the tree tracks.
func Requests(t *Tree) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.reqs)
}

// Guest is the tree's current guest.
func Guest(t *Tree) *runtime.Guest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.g
}

// SetClock replaces the clock of the event streams' backlog rule for the
// requests that follow, and sets a function run after the rule cut a
// stream.
func SetClock(t *Tree, c core.Clock, cut func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clock, t.cutHook = c, cut
}

// Backlog is the bytes the tree's streams hold for their clients.
func Backlog(t *Tree) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.reqs {
		n += s.buffered()
	}
	return n
}

// Backlog rule figures.
const (
	MaxBacklog      = maxBacklog
	BacklogPatience = backlogPatience
)

// buffered is the stream's backlog in bytes.
func (s *stream) buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backlog
}

// RespondLocked delivers part of request id as the guest's respond import
// would; call it where the import runs, inside a guest call (a SetRequest
// function), with the tree's lock held.
func RespondLocked(t *Tree, id uint64, part runtime.ResponsePart) {
	(&services{t: t, gen: t.gen}).Respond(id, part)
}
