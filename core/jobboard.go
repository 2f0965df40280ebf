package core

import (
	"errors"
	"fmt"
	"sync"
)

// jobBoard settles jobs in memory (DESIGN §10): a child's turn that ends
// here wakes whoever waits for it even when storage refused its terminal,
// so no waiter hangs on a record that may never land. Waiters still read
// the database first; the board only wakes them, and carries the end
// itself when it was not stored. The zero value is ready to use.
type jobBoard struct {
	mu      sync.Mutex
	watches map[string]*jobWatch // by the child's task prompt id
}

// jobWatch is one child turn's settlement: done is closed once, with out set.
type jobWatch struct {
	done    chan struct{}
	out     ChildResult
	settled bool
	refs    int
}

// watch returns the settlement of the prompt's turn, creating it if needed.
func (b *jobBoard) watch(promptID string) *jobWatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.watches == nil {
		b.watches = map[string]*jobWatch{}
	}
	w := b.watches[promptID]
	if w == nil {
		w = &jobWatch{done: make(chan struct{})}
		b.watches[promptID] = w
	}
	w.refs++
	return w
}

// unwatch drops a waiter; a settlement nobody needs any more is forgotten,
// except an unstored end, which only memory holds.
func (b *jobBoard) unwatch(promptID string, w *jobWatch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.refs--
	if w.refs <= 0 && !(w.settled && w.out.Unstored) && b.watches[promptID] == w {
		delete(b.watches, promptID)
	}
}

// settle records how a turn ended and wakes its waiters. A stored end
// needs no memory once they have read it; an unstored one is kept for a
// waiter that comes later.
func (b *jobBoard) settle(promptID string, out ChildResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.watches[promptID]
	if w == nil {
		if !out.Unstored {
			return
		}
		if b.watches == nil {
			b.watches = map[string]*jobWatch{}
		}
		w = &jobWatch{done: make(chan struct{})}
		b.watches[promptID] = w
	}
	if w.settled {
		if out.Unstored {
			return
		}
		delete(b.watches, promptID) // stored after all: readers find it
		return
	}
	w.out, w.settled = out, true
	close(w.done)
	if !out.Unstored && w.refs == 0 {
		delete(b.watches, promptID)
	}
}

// settleTurn settles x's turn on the board after its terminal was written
// (err nil) or refused (err). Every turn is settled: the board is cheap and
// only a child's task prompt is ever watched.
func (inst *Instance) settleTurn(x *Execution, state PromptState, err error) {
	out := ChildResult{State: state}
	if isStorageFailure(err) {
		out.Unstored = true
		out.Text = fmt.Sprintf("The sub-agent's turn ended (%s), but storage refused to record it: %v", state, err)
		inst.log.Error("a turn's end could not be stored; its job is settled in memory", "session", x.sessionID, "prompt", x.promptID, "err", err)
	}
	inst.jobs.settle(x.promptID, out)
}

// turnEndState is the state a finishing execution's record gives its
// prompt, or "" when the record does not end the turn (a shutdown, a
// scheduled retry).
func turnEndState(cause error, out Outcome, storageEnd bool) PromptState {
	switch {
	case errors.Is(cause, ErrShutdown):
		return ""
	case errors.Is(cause, ErrInterrupted) || errors.Is(cause, ErrSuperseded):
		return PromptInterrupted
	case storageEnd || out.Kind == Failed:
		return PromptFailed
	case cause == nil && out.Kind == Succeeded:
		return PromptSucceeded
	}
	return ""
}
