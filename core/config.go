package core

import (
	"fmt"
	"time"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/retry"
	"github.com/revenantrt/revenant/core/storage"
)

// Config is an instance's immutable configuration. Start from NewConfig and
// derive with the With methods; each returns a copy.
type Config struct {
	resumeBudget   int
	maxClaimAge    time.Duration
	wakeInterval   time.Duration
	interruptGrace time.Duration
	queueCap       int
	commitHooks    []CommitHook
	retryObserver  func(retry.Wait)
}

// CommitHook runs inside every append transaction after the projectors, with
// the event just stored. An error aborts the transaction.
type CommitHook func(tx storage.Tx, ev event.Event) error

// Defaults.
const (
	DefaultResumeBudget   = 10
	DefaultWakeInterval   = 10 * time.Second
	DefaultInterruptGrace = 5 * time.Second
	DefaultQueueCap       = 100
)

// NewConfig returns the default configuration.
func NewConfig() Config {
	return Config{
		resumeBudget:   DefaultResumeBudget,
		wakeInterval:   DefaultWakeInterval,
		interruptGrace: DefaultInterruptGrace,
		queueCap:       DefaultQueueCap,
	}
}

// WithResumeBudget sets how many consecutive resumes without progress a turn
// may take; the next count fails it with failed{type:"aborted"}. Default 10.
func (c Config) WithResumeBudget(n int) Config { c.resumeBudget = n; return c }

// WithMaxClaimAge fails a root's turn instead of resuming it once its claim
// is older than d. Zero (the default) turns the check off.
func (c Config) WithMaxClaimAge(d time.Duration) Config { c.maxClaimAge = d; return c }

// WithWakeInterval sets how far ahead the wake-up is armed while a claim
// exists: the longest a turn whose instance died waits for the next wake.
// Default 10 s. The hosts' settings refuse less than 100 ms
// (settings.MinWakeInterval): while a turn runs the wake-up fires that
// often.
func (c Config) WithWakeInterval(d time.Duration) Config { c.wakeInterval = d; return c }

// WithInterruptGrace sets how long an interrupt waits for a running
// execution to stop and record the interrupt itself before committing it
// directly. Default 5 s.
func (c Config) WithInterruptGrace(d time.Duration) Config { c.interruptGrace = d; return c }

// WithQueueCap sets how many prompts a session may hold that have not
// ended (queued, or running their turn); Admit refuses a prompt past it
// with ErrQueueFull. A task call's prompt and a background child's notice
// are always admitted. Default 100; at least 1 and at most MaxQueueCap,
// or Open refuses the configuration.
func (c Config) WithQueueCap(n int) Config { c.queueCap = n; return c }

// MaxQueueCap is the largest queue cap (the hosts' queue_cap setting is
// bounded by it too). The cap sizes more than the queue: a session's
// snapshot lists every prompt not ended (up to 1 KiB of its text each),
// and an interrupt or a replace cancels them all in one transaction,
// which the session's other writes wait for (with 19,000 queued, a 21 MB
// snapshot and an interrupt of about 7 s on a loaded machine). At 1,000
// both are about a nineteenth of that, a snapshot of about 1 MiB of
// prompts (the default max_body) and an interrupt well under a second,
// ten times the default cap.
const MaxQueueCap = 1000

// WithCommitHook adds a hook run inside every append transaction.
func (c Config) WithCommitHook(h CommitHook) Config {
	c.commitHooks = append(append([]CommitHook(nil), c.commitHooks...), h)
	return c
}

// WithRetryObserver sets a function told of every wait for storage (the
// write and settlement schedules of DESIGN §8) once its timer is set: for
// metrics, and for tests and the simulator that drive a virtual clock
// through the waits. It is called from the waiting goroutine with no lock
// held and must not block for long. Default none.
func (c Config) WithRetryObserver(f func(retry.Wait)) Config { c.retryObserver = f; return c }

// ResumeBudget is the configured budget.
func (c Config) ResumeBudget() int { return c.resumeBudget }

// MaxClaimAge is the configured maximum claim age (0: off).
func (c Config) MaxClaimAge() time.Duration { return c.maxClaimAge }

// QueueCap is the configured cap on a session's prompts not ended.
func (c Config) QueueCap() int { return c.queueCap }

// InterruptGrace is the configured interrupt grace. A host that waits for
// executions to stop on their own (a delete's Close) waits as long.
func (c Config) InterruptGrace() time.Duration { return c.interruptGrace }

func (c Config) validate() error {
	switch {
	case c.resumeBudget < 0:
		return fmt.Errorf("resume budget %d is negative", c.resumeBudget)
	case c.maxClaimAge < 0:
		return fmt.Errorf("max claim age %v is negative", c.maxClaimAge)
	case c.wakeInterval <= 0:
		return fmt.Errorf("wake interval %v must be positive", c.wakeInterval)
	case c.interruptGrace < 0:
		return fmt.Errorf("interrupt grace %v is negative", c.interruptGrace)
	case c.queueCap <= 0:
		return fmt.Errorf("queue cap %d must be positive", c.queueCap)
	case c.queueCap > MaxQueueCap:
		return fmt.Errorf("queue cap %d is above the largest allowed, %d", c.queueCap, MaxQueueCap)
	}
	return nil
}
