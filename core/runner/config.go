package runner

import (
	"fmt"
	"slices"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/retry"
)

// Config is the runner's immutable configuration; derive with the With
// methods from NewConfig.
type Config struct {
	stepCap         int
	streamIdle      time.Duration
	stepWall        time.Duration
	toolTimeout     time.Duration
	outputCap       int
	checkpointEvery time.Duration
	checkpointBytes int
	system          string
	retries         int
	retryInitial    time.Duration
	retryMax        time.Duration
	contextBytes    int
	permissions     []permission.Rule
	allowedModels   []string // nil: any
	taskDepth       int
	maxSubagents    int
}

// Defaults.
const (
	DefaultStepCap         = 100
	DefaultStreamIdle      = 60 * time.Second
	DefaultStepWall        = 10 * time.Minute
	DefaultToolTimeout     = 2 * time.Minute
	DefaultOutputCap       = 16 << 10
	DefaultCheckpointEvery = time.Second
	DefaultCheckpointBytes = 2 << 10
	DefaultRetries         = 6
	DefaultRetryInitial    = time.Second
	DefaultRetryMax        = time.Minute
	DefaultContextBytes    = 400 << 10
)

// NewConfig returns the defaults.
func NewConfig() Config {
	return Config{
		stepCap: DefaultStepCap, streamIdle: DefaultStreamIdle, stepWall: DefaultStepWall,
		toolTimeout: DefaultToolTimeout, outputCap: DefaultOutputCap,
		checkpointEvery: DefaultCheckpointEvery, checkpointBytes: DefaultCheckpointBytes,
		retries: DefaultRetries, retryInitial: DefaultRetryInitial, retryMax: DefaultRetryMax,
		contextBytes: DefaultContextBytes, taskDepth: core.DefaultTaskDepth,
		maxSubagents: core.DefaultMaxSubagents,
	}
}

// WithStepCap sets the durable cap on model steps per turn; the turn fails
// with failed{type:"step_limit"} instead of starting one more. A request
// retried after a provider failure is the same step and is not counted
// again. Default 100.
func (c Config) WithStepCap(n int) Config { c.stepCap = n; return c }

// WithStreamIdle fails a step whose stream sends nothing for d. Default 60 s.
func (c Config) WithStreamIdle(d time.Duration) Config { c.streamIdle = d; return c }

// WithStepWall fails a step that streams for longer than d. Default 10 min.
func (c Config) WithStepWall(d time.Duration) Config { c.stepWall = d; return c }

// WithToolTimeout is the wall limit of a tool call whose tool sets none.
// Default 2 min.
func (c Config) WithToolTimeout(d time.Duration) Config { c.toolTimeout = d; return c }

// WithOutputCap is the output cap (bytes) of a tool call whose tool sets
// none. Default 16 KiB.
func (c Config) WithOutputCap(n int) Config { c.outputCap = n; return c }

// WithCheckpoints sets how much streamed text a kill may lose: a checkpoint
// is written once the oldest unsaved text is `every` old, or once `bytes` of
// text are unsaved, whichever comes first. Default 1 s and 2 KiB.
func (c Config) WithCheckpoints(every time.Duration, bytes int) Config {
	c.checkpointEvery, c.checkpointBytes = every, bytes
	return c
}

// WithRetries sets how a retryable model failure (429, 5xx, a cut
// connection) is retried: up to n times in a row for one step, waiting the
// provider's Retry-After or else initial doubling up to max. Each wait is a
// durable retry.scheduled that survives eviction and counts no resume.
// Default 6 times, 1 s to 1 min.
func (c Config) WithRetries(n int, initial, max time.Duration) Config {
	c.retries, c.retryInitial, c.retryMax = n, initial, max
	return c
}

// WithContextBytes sets the size a model request may reach: bytes of the
// system prompt, of each tool spec's name, description and schema, of
// message text and of tool-call arguments. Past it the oldest tool outputs
// are elided with ElidedMarker (not the results that say what happened to
// the call: NoResult and NotRun, made up for calls without one, and a
// permission request's decline or cancellation, stored or made up); if
// eliding them all is not enough, the
// oldest whole exchanges are left out, unread, and the request starts with
// OmittedNotice. The current prompt's exchange is always sent, even alone
// past the size. Default 400 KiB, about 100k tokens.
func (c Config) WithContextBytes(n int) Config { c.contextBytes = n; return c }

// WithTaskDepth sets how deep sub-agents may nest: a task call from a
// session already at depth n (a root is 0) fails with a tool error. Default
// 3.
func (c Config) WithTaskDepth(n int) Config { c.taskDepth = n; return c }

// WithMaxSubagents sets how many child sessions one tree may hold, at all
// depths together: a task call in a tree that has n children already fails
// with a tool error, and the turn goes on. Every child the tree ever had
// counts, ended or not (children are deleted only with their tree), so a
// refusal stays one when a kill makes the call run again. 0 allows none.
// Default 64 (core.DefaultMaxSubagents).
func (c Config) WithMaxSubagents(n int) Config { c.maxSubagents = n; return c }

// WithSystemPrompt sets the system prompt sent with every request. Default
// none.
func (c Config) WithSystemPrompt(s string) Config { c.system = s; return c }

// WithPermissions sets the operator's permission rules (REVENANT_CONFIG
// `permissions`, in file order), the base layer every session's calls are
// decided by before the session's own rules and the tree's saved `always`
// rules (core/permission). Default none: each tool's default decides.
func (c Config) WithPermissions(rules []permission.Rule) Config {
	c.permissions = append([]permission.Rule(nil), rules...)
	return c
}

// WithAllowedModels sets the models a session's config may name: a turn
// of a session naming another fails with failed{type:"model_not_allowed"}
// before its next model request. A session naming none uses the runner's
// model, which the host checks against the same list. Default nil: any
// model.
func (c Config) WithAllowedModels(names []string) Config {
	c.allowedModels = slices.Clone(names)
	return c
}

// allowsModel reports whether a session's model may be requested; the
// empty name is the runner's own model.
func (c Config) allowsModel(name string) bool {
	return name == "" || c.allowedModels == nil || slices.Contains(c.allowedModels, name)
}

// providerPolicy is the provider retry schedule (core/retry): its waits
// are durable retry.scheduled events, so only its delays and count are used.
func (c Config) providerPolicy() retry.Policy {
	return retry.Provider(c.retries, c.retryInitial, c.retryMax)
}

func (c Config) validate() error {
	switch {
	case c.stepCap <= 0:
		return fmt.Errorf("step cap %d must be positive", c.stepCap)
	case c.streamIdle <= 0 || c.stepWall <= 0 || c.toolTimeout <= 0 || c.checkpointEvery <= 0:
		return fmt.Errorf("timeouts must be positive")
	case c.outputCap <= 0 || c.checkpointBytes <= 0 || c.contextBytes <= 0:
		return fmt.Errorf("output cap, checkpoint bytes and context bytes must be positive")
	case c.taskDepth < 0:
		return fmt.Errorf("task depth %d must be at least 0", c.taskDepth)
	case c.maxSubagents < 0:
		return fmt.Errorf("max sub-agents %d must be at least 0", c.maxSubagents)
	case c.retries < 0:
		return fmt.Errorf("retries %d must be at least 0", c.retries)
	case c.retries > 0 && (c.retryInitial <= 0 || c.retryMax < c.retryInitial):
		// With no retries the delays are never waited (core/settings maps
		// model_retries 0 to none and leaves them as the file gave them).
		return fmt.Errorf("retry delays must be positive, initial at most max")
	}
	for i, r := range c.permissions {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("permission rule %d: %w", i, err)
		}
	}
	return c.providerPolicy().Validate()
}
