package core

import (
	"context"
	"time"

	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/storage"
)

// Host is everything core needs from the platform.
type Host struct {
	DB    storage.DB
	Clock Clock
	Wake  Waker
	IDs   IDSource
	// Log receives structured logs; nil discards them. It is a *slog.Logger
	// on every platform but the wasip1 guest (package logs).
	Log *logs.Logger
}

// Clock gives time in integer milliseconds since the Unix epoch and timers.
// Hosts use the real clock; tests and the simulator use a virtual one.
type Clock interface {
	Now() int64
	// AfterFunc calls f in its own goroutine after d and returns a function
	// that cancels the call, reporting whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Waker is the tree's one wake-up (a Durable Object alarm, a host scheduler
// entry). A delivered wake-up is used up.
type Waker interface {
	// Arm makes sure a wake-up fires no later than at (ms). If one is already
	// set earlier it stays; a later one is moved to at.
	Arm(ctx context.Context, at int64) error
}

// IDSource mints unique ids. Hosts use random ids; tests and the simulator
// use seeded ones so histories repeat.
type IDSource interface {
	NewID() string
}
