package check

import (
	"strings"

	"github.com/revenantrt/revenant/core/event"
)

// The rules of provider retries (DESIGN §6.6, docs/api.md
// session.retry.scheduled@1): a retryable model failure puts the turn to
// sleep until a time (the provider's Retry-After, else the retry
// schedule's backoff), keeping its claim with retry_at; a new execution
// with cause retry continues it then, never before; each step is retried
// at most the configured number of times, counted from 1 for every step
// (a step recorded complete starts the count again), and only past that
// count does the turn fail with type model. The wake-up that brings a
// sleeping claim back is judged while the tree runs (RuleWakeDue,
// moment.go).
const (
	RuleRetryNotEarly Rule = "retry-not-early"
	RuleRetryBudget   Rule = "retry-budget"
	RuleRetryDelay    Rule = "retry-delay-bounded"
	// RuleRetryHint: a retry of a provider failure that asked for a wait
	// (Retry-After, retry-after-ms) is scheduled no sooner than that wait
	// after the failure was answered (capped by MaxDelay).
	RuleRetryHint Rule = "retry-honours-hint"
	// RuleRetryNotResumed: a turn asleep on its scheduled retry goes on by
	// that retry (cause retry, uncounted), never by a counted resume: the
	// sleep is no death, and resuming it would spend the resume budget on
	// provider failures.
	RuleRetryNotResumed Rule = "retry-not-resumed"
	// RuleRetryOwned: a claim sleeps (retry_at) only on the retry its own
	// execution scheduled: a turn that ended asleep (interrupted) hands
	// no sleep to the next turn its claim carries on into, nor does a
	// resumed or retried execution keep the one it went on from. Seen by
	// the host after every commit: a new turn that kept an old sleep runs
	// at once while live, and only a kill shows it, as a late resume.
	RuleRetryOwned Rule = "retry-owned"
	RuleWakeDue    Rule = "wake-before-due"
	// RuleWakeLoop: the wake-up is not re-armed at or before the instant
	// of its delivery again and again (a hot loop), seen by the host.
	RuleWakeLoop Rule = "wake-not-hot"
)

// The defaults of the provider retry settings (settings.ModelRetries,
// RetryMax, MaxRetryAfter), for a tree whose ledger names none.
const (
	defaultRetries  = 6
	defaultMaxDelay = int64(60_000)
)

// retryPolicy is the tree's provider retry settings, defaults filled in.
func (ck *checker) retryPolicy() RetryPolicy {
	p := RetryPolicy{Retries: defaultRetries, MaxDelay: defaultMaxDelay}
	if r := ck.ledger.Retry; r != nil {
		if r.Retries > 0 {
			p.Retries = r.Retries
		}
		if r.MaxDelay > 0 {
			p.MaxDelay = r.MaxDelay
		}
	}
	return p
}

// retryScheduled judges a session.retry.scheduled@1: its attempt counts
// the step's retries from 1, within the budget, and it sleeps no longer
// than the provider may ask or the schedule waits.
func (ck *checker) retryScheduled(sid string, e *rec, tr *turn) {
	p := ck.retryPolicy()
	ck.res.Retries++
	tr.stepRetries++
	tr.retry = e
	switch {
	case e.p.Attempt != tr.stepRetries:
		ck.fail(sid, e, RuleRetryBudget, "retry attempt %d, but it is retry %d of the step (counted since the turn's last step recorded complete)",
			e.p.Attempt, tr.stepRetries)
	case e.p.Attempt > p.Retries:
		ck.fail(sid, e, RuleRetryBudget, "retry attempt %d is past the budget of %d retries", e.p.Attempt, p.Retries)
	}
	if wait := e.p.RetryAt - e.At; wait > p.MaxDelay {
		ck.fail(sid, e, RuleRetryDelay, "the retry is scheduled at %d, %d ms after it was recorded: longer than any wait allowed (%d ms)",
			e.p.RetryAt, wait, p.MaxDelay)
	}
	if h, ok := ck.hintOf(e.p.Reason); ok {
		if due := h.Answered + min(h.Wait, p.MaxDelay); e.p.RetryAt < due {
			ck.fail(sid, e, RuleRetryHint, "the retry is scheduled at %d, %d ms before the wait the provider asked for ended (%d ms from %d, failure %s)",
				e.p.RetryAt, due-e.p.RetryAt, h.Wait, h.Answered, h.Mark)
		}
	}
}

// retryResumed judges an execution.resumed: a turn whose retry is
// scheduled and not started yet is asleep, not dead, and goes on only by
// that retry.
func (ck *checker) retryResumed(sid string, e *rec, tr *turn) {
	if tr.retry != nil {
		ck.fail(sid, e, RuleRetryNotResumed, "the turn is resumed (attempt %d) while its retry scheduled at #%d for %d has not started: a sleeping turn goes on by its retry",
			e.p.Attempt, tr.retry.Seq, tr.retry.p.RetryAt)
	}
}

// hintOf finds the provider failure a retry's reason quotes, among those
// that asked for a wait.
func (ck *checker) hintOf(reason string) (Hint, bool) {
	for _, h := range ck.ledger.Hints {
		if strings.Contains(reason, h.Mark) {
			return h, true
		}
	}
	return Hint{}, false
}

// retryStarted judges an execution started with cause retry: not before
// the time its retry was scheduled at.
func (ck *checker) retryStarted(sid string, e *rec, tr *turn) {
	if tr.retry != nil && e.At < tr.retry.p.RetryAt {
		ck.fail(sid, e, RuleRetryNotEarly, "the retry's execution starts at %d, %d ms before the retry was due (#%d, at %d)",
			e.At, tr.retry.p.RetryAt-e.At, tr.retry.Seq, tr.retry.p.RetryAt)
	}
	tr.retry = nil
}

// failedModel judges a turn that failed with type model: one that gave up
// on retries (every model failure of a tree with a retry policy in its
// ledger: the simulator's provider fails only retryably; elsewhere, one
// whose message says it gave up) had its step retried the full budget
// first.
func (ck *checker) failedModel(sid string, e *rec, tr *turn) {
	if e.Type != event.ExecutionFailed || e.p.Kind != event.FailModel {
		return
	}
	if ck.ledger.Retry == nil && !strings.Contains(e.p.Message, "gave up after") {
		return
	}
	ck.res.RetriesGaveUp++
	if p := ck.retryPolicy(); tr.stepRetries < p.Retries {
		ck.fail(sid, e, RuleRetryBudget, "the turn fails model after %d retries of its step, before the budget of %d was spent (%q)",
			tr.stepRetries, p.Retries, e.p.Message)
	}
}
