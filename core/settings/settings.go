package settings

import (
	"errors"
	"fmt"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/runner"
)

// None is the value of ResumeBudget or ModelRetries that means zero: no
// resume without progress, no provider retry. (Zero itself means the
// default.)
const None = -1

// Settings are a tree's knobs. Zero fields take the default named on each;
// negative values are invalid except None where it is allowed.
type Settings struct {
	// ResumeBudget is how many consecutive resumes without progress a turn
	// may take before it fails aborted (core.WithResumeBudget). Default
	// core.DefaultResumeBudget (10); None: none.
	ResumeBudget int
	// MaxClaimAge fails a root's turn instead of resuming it once its claim
	// is older than this (core.WithMaxClaimAge). Default: no limit; at
	// least MinMaxClaimAge.
	MaxClaimAge time.Duration
	// WakeInterval is how far ahead the wake-up is armed while a claim
	// exists (core.WithWakeInterval). Default 10 s; at least
	// MinWakeInterval.
	WakeInterval time.Duration
	// InterruptGrace is how long an interrupt waits for the running
	// execution to record it (core.WithInterruptGrace). Default 5 s; at
	// least MinInterruptGrace.
	InterruptGrace time.Duration
	// QueueCap is how many prompts a session may hold that have not ended
	// (queued or running); a client's prompt past it is refused, 429
	// queue_full (core.WithQueueCap). Default core.DefaultQueueCap (100);
	// at most MaxQueueCap.
	QueueCap int

	// StepCap is the cap on model steps per turn (runner.WithStepCap).
	// Default 100.
	StepCap int
	// StreamIdle fails a step whose stream sends nothing this long
	// (runner.WithStreamIdle). Default 60 s; at least MinStreamIdle.
	StreamIdle time.Duration
	// StepWall fails a step that streams longer than this
	// (runner.WithStepWall). Default 10 min; at least MinStepWall.
	StepWall time.Duration
	// ToolTimeout is the wall limit of a tool call whose tool sets none
	// (runner.WithToolTimeout). Default 2 min.
	ToolTimeout time.Duration
	// ToolOutputCap is the output cap, in bytes, of a tool call whose tool
	// sets none (runner.WithOutputCap). Default 16 KiB.
	ToolOutputCap int
	// CheckpointEvery and CheckpointBytes bound the streamed text a kill
	// may lose (runner.WithCheckpoints). Default 1 s and 2 KiB;
	// CheckpointEvery at least MinCheckpointEvery.
	CheckpointEvery time.Duration
	CheckpointBytes int
	// ModelRetries is how often a retryable model failure is retried in a
	// row for one step, waiting RetryInitial doubling up to RetryMax unless
	// the provider says how long (runner.WithRetries). Default 6 times,
	// 1 s to 1 min, at least MinRetryInitial and MinRetryMax; None: never
	// retried.
	ModelRetries int
	RetryInitial time.Duration
	RetryMax     time.Duration
	// ContextBytes is the request size (system prompt and tool specs
	// included) past which the oldest tool outputs are elided, then the oldest exchanges left out
	// (runner.WithContextBytes). Default 400 KiB.
	ContextBytes int
	// MaxSubagents is how many child sessions one tree may hold, at all
	// depths together; a task call past it fails with a tool error
	// (runner.WithMaxSubagents). Default core.DefaultMaxSubagents (64).
	MaxSubagents int
	// MaxRetryAfter caps the wait an OpenAI-compatible provider may ask
	// for with Retry-After (openai.Config.MaxRetryAfter). Default 60 s; at
	// least MinMaxRetryAfter.
	MaxRetryAfter time.Duration

	// Heartbeat is the interval of comments on idle event streams
	// (api.WithHeartbeat). Default 15 s.
	Heartbeat time.Duration
	// MaxBody caps request bodies, in bytes (api.WithMaxBody), at most
	// MaxMaxBody. Default 1 MiB.
	MaxBody int64
	// SessionPageSize is how many sessions GET /v1/sessions lists when
	// the request gives no limit, at most api.MaxListLimit
	// (api.WithPageSizes). Default 50.
	SessionPageSize int
	// MessagePageSize is how many messages GET /v1/sessions/{id} returns
	// when the request gives no limit, at most api.MaxMessageLimit
	// (api.WithPageSizes). Default 50.
	MessagePageSize int
}

// Configs are what a host builds a tree's instance, turn runner and API
// handler from. A host adds what is its own to each (commit hooks, the
// system prompt, allowed origins, session defaults).
type Configs struct {
	Core   core.Config
	Runner runner.Config
	API    api.Config
}

// Configs validates s and maps it onto core's, the runner's and the API's
// builders, starting from their defaults: the one mapping every host uses.
func (s Settings) Configs() (Configs, error) {
	if err := s.Validate(); err != nil {
		return Configs{}, err
	}
	return Configs{Core: s.core(), Runner: s.runner(), API: s.api()}, nil
}

func (s Settings) core() core.Config {
	return core.NewConfig().
		WithResumeBudget(count(or(s.ResumeBudget, core.DefaultResumeBudget))).
		WithMaxClaimAge(s.MaxClaimAge). // its default, zero, is "no limit"
		WithWakeInterval(or(s.WakeInterval, core.DefaultWakeInterval)).
		WithInterruptGrace(or(s.InterruptGrace, core.DefaultInterruptGrace)).
		WithQueueCap(or(s.QueueCap, core.DefaultQueueCap))
}

func (s Settings) runner() runner.Config {
	c := runner.NewConfig().
		WithStepCap(or(s.StepCap, runner.DefaultStepCap)).
		WithStreamIdle(or(s.StreamIdle, runner.DefaultStreamIdle)).
		WithStepWall(or(s.StepWall, runner.DefaultStepWall)).
		WithToolTimeout(or(s.ToolTimeout, runner.DefaultToolTimeout)).
		WithOutputCap(or(s.ToolOutputCap, runner.DefaultOutputCap)).
		WithCheckpoints(or(s.CheckpointEvery, runner.DefaultCheckpointEvery), or(s.CheckpointBytes, runner.DefaultCheckpointBytes)).
		WithContextBytes(or(s.ContextBytes, runner.DefaultContextBytes)).
		WithMaxSubagents(or(s.MaxSubagents, core.DefaultMaxSubagents))
	initial, maxDelay := s.retryDelays()
	return c.WithRetries(count(or(s.ModelRetries, runner.DefaultRetries)), initial, maxDelay)
}

func (s Settings) api() api.Config {
	c := api.NewConfig().
		WithHeartbeat(or(s.Heartbeat, api.DefaultHeartbeat)).
		WithMaxBody(or(s.MaxBody, api.DefaultMaxBody))
	return c.WithPageSizes(or(s.SessionPageSize, api.DefaultListLimit), or(s.MessagePageSize, api.DefaultMessageLimit))
}

// retryDelays are the provider retry delays with their defaults filled in.
func (s Settings) retryDelays() (initial, maxDelay time.Duration) {
	return or(s.RetryInitial, runner.DefaultRetryInitial), or(s.RetryMax, runner.DefaultRetryMax)
}

// or is v, or def for zero.
func or[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// count maps None to 0.
func count(n int) int {
	if n == None {
		return 0
	}
	return n
}

// FieldError is one invalid field, named as a configuration file names it
// (`wake_interval`).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// MaxMaxBody is the largest max_body: a body is held whole in memory (and,
// on Cloudflare, in the isolate and again in Go's memory) before it is
// decoded, and a cap near the int64 limit would overflow the one byte past
// it that a reader takes to see a body over the cap.
const MaxMaxBody = 1 << 30

// MaxQueueCap is the largest queue_cap: core.MaxQueueCap, which says why
// (a session's snapshot and an interrupt's transaction grow with it), and
// which core.Open refuses past for a Go program that sets the cap itself.
const MaxQueueCap = core.MaxQueueCap

// MinWakeInterval is the shortest wake_interval: while a turn runs, the
// wake-up is re-armed that far ahead and fires that often, so a wake
// interval of a few nanoseconds would wake the tree (on Cloudflare, run
// its alarm) without pause. On Cloudflare the interval is also how soon an
// evicted turn resumes, so the floor stays well under cmd/worker's default of 1 s.
const MinWakeInterval = 100 * time.Millisecond

// MinHeartbeat is the shortest heartbeat: every idle event stream is sent a
// comment that often, so a heartbeat of a few nanoseconds would have each
// open stream write without pause.
const MinHeartbeat = 100 * time.Millisecond

// MinStreamIdle is the shortest stream_idle: a step fails once its model
// stream is silent that long, and a provider's first chunk commonly takes
// longer than a few milliseconds (the watchdog also counts in whole
// milliseconds, so under 1ms it fires at once): below a second nearly
// every step would fail, each failure a turn lost.
const MinStreamIdle = time.Second

// MinCheckpointEvery is the shortest checkpoint_every: streamed text is
// written to storage once its oldest unsaved part is that old, so a few
// nanoseconds would write a checkpoint (a commit; on Cloudflare a storage
// write) for nearly every chunk of every streaming step. At the floor a
// step writes at most ten a second for it, and a kill loses at most a
// tenth of a second of text.
const MinCheckpointEvery = 100 * time.Millisecond

// MinStepWall is the shortest step_wall: a step fails once it has streamed
// that long, and no model streams a step in a few milliseconds. It is
// MinStreamIdle's: a step may last at least as long as it may be silent.
const MinStepWall = MinStreamIdle

// MinToolTimeout is the shortest tool_timeout: a tool call without a limit
// of its own fails once it has run that long, so a few nanoseconds would
// fail every such call before it did anything; the floor is that of a
// request's timeout (config.MinTimeout).
const MinToolTimeout = 100 * time.Millisecond

// MinRetryInitial is the shortest retry_initial: a step's first retry of a
// retryable model failure (a 429, a 5xx, a dropped stream) waits that
// long, each next one twice as long, so a few nanoseconds would send the
// step's retries back to back (six by default, a few milliseconds in all)
// to a provider that has just said it is overloaded, spending the budget
// before any passing fault could pass. At the floor the retries of the
// default budget still spread over six seconds.
const MinRetryInitial = 100 * time.Millisecond

// MinRetryMax is the shortest retry_max, the cap of the doubling waits: a
// cap under the first wait's floor would bring every wait back under it.
const MinRetryMax = MinRetryInitial

// MinMaxRetryAfter is the shortest max_retry_after, the cap on the wait a
// provider asks for (Retry-After): a Retry-After counts whole seconds, so
// a cap under one second would cut every such wait a provider asks for,
// and a few nanoseconds would retry at once a provider that said when it
// could take the request again.
const MinMaxRetryAfter = time.Second

// MinInterruptGrace is the shortest interrupt_grace: an interrupt waits
// that long for the running execution to stop and record the interrupt
// itself (a step it was streaming kept as cut, with all the text received)
// before committing it over the execution, whose writes the fence then
// refuses (the text since its last checkpoint lost). A few nanoseconds
// would always take the second way, even from an execution that stops at
// once; the floor is that of a checkpoint (MinCheckpointEvery), time for
// one write. (On Cloudflare a delete waits at least 5 s whatever the grace.)
const MinInterruptGrace = MinCheckpointEvery

// MinMaxClaimAge is the shortest max_claim_age: a root's turn whose claim
// is older when a sweep finds it not running (a boot after a crash or an
// eviction, a wake-up, a retry come due) fails instead of resuming. The
// claim is taken when the turn starts and kept across its resumes and
// retry waits, so its age is the turn's, and a few nanoseconds would fail
// every turn any sweep meets, a queued prompt's included. One model step
// may stream for minutes and one provider retry wait up to a minute by
// default (retry_max, max_retry_after): under a minute, turns that only
// waited out one would be failed rather than resumed.
const MinMaxClaimAge = time.Minute

// floor is a duration field's least allowed value, and why it has one.
type floor struct {
	name  string
	value *time.Duration
	least time.Duration
	why   string
}

// floors are the duration fields a few nanoseconds would make absurd: a
// timer firing without pause, every step or call failing at once, retries
// sent back to back, or every interrupted or resumed turn cut short.
func (s *Settings) floors() []floor {
	return []floor{
		{nameWakeInterval, &s.WakeInterval, MinWakeInterval, "the wake-up fires that often while a turn runs"},
		{nameStreamIdle, &s.StreamIdle, MinStreamIdle, "a model stream silent that long fails its step"},
		{nameStepWall, &s.StepWall, MinStepWall, "a model step streaming that long fails"},
		{nameToolTimeout, &s.ToolTimeout, MinToolTimeout, "a tool call running that long fails"},
		{nameCheckpointEvery, &s.CheckpointEvery, MinCheckpointEvery, "streamed text is written to storage that often"},
		{nameHeartbeat, &s.Heartbeat, MinHeartbeat, "every idle event stream is sent a comment that often"},
		{nameRetryInitial, &s.RetryInitial, MinRetryInitial, "a model request that failed is first retried after that long"},
		{nameRetryMax, &s.RetryMax, MinRetryMax, "the waits between retries of a model request are capped at that"},
		{nameMaxRetryAfter, &s.MaxRetryAfter, MinMaxRetryAfter, "a provider's Retry-After, in whole seconds, is capped at that"},
		{nameInterruptGrace, &s.InterruptGrace, MinInterruptGrace, "an interrupt waits that long for the turn to record it itself"},
		{nameMaxClaimAge, &s.MaxClaimAge, MinMaxClaimAge, "a turn that old fails instead of resuming"},
	}
}

// Validate reports every invalid field, each as a *FieldError (joined:
// errors.As finds the first; Unwrap() []error lists them all), or nil.
func (s Settings) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	for _, f := range s.Fields() {
		switch {
		case f.Int != nil && f.NoneAllowed && *f.Int < None:
			bad(f.Name, "%d is out of range: 0 or more, or %d for none", *f.Int, None)
		case f.Int != nil && !f.NoneAllowed && *f.Int < 0:
			bad(f.Name, "%d is negative", *f.Int)
		case f.Int64 != nil && *f.Int64 < 0:
			bad(f.Name, "%d is negative", *f.Int64)
		case f.Duration != nil && *f.Duration < 0:
			bad(f.Name, "%s is negative", *f.Duration)
		}
	}
	for _, f := range s.floors() {
		if *f.value > 0 && *f.value < f.least {
			bad(f.name, "%s is shorter than the least allowed, %s (%s)", *f.value, f.least, f.why)
		}
	}
	if s.MaxBody > MaxMaxBody {
		bad(nameMaxBody, "%d is above the largest allowed, %d (1 GiB)", s.MaxBody, MaxMaxBody)
	}
	if s.QueueCap > MaxQueueCap {
		bad(nameQueueCap, "%d is above the largest allowed, %d (a snapshot lists every prompt not ended, and an interrupt cancels them all in one transaction)", s.QueueCap, MaxQueueCap)
	}
	if s.SessionPageSize > api.MaxListLimit {
		bad(nameSessionPageSize, "%d is above the most a request may ask for, %d", s.SessionPageSize, api.MaxListLimit)
	}
	if s.MessagePageSize > api.MaxMessageLimit {
		bad(nameMessagePageSize, "%d is above the most a request may ask for, %d", s.MessagePageSize, api.MaxMessageLimit)
	}
	if initial, maxDelay := s.retryDelays(); initial > 0 && maxDelay > 0 && initial > maxDelay && s.ModelRetries != None {
		bad(nameRetryInitial, "%s is longer than retry_max (%s)", initial, maxDelay)
	}
	return errors.Join(errs...)
}
