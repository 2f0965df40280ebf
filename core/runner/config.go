package runner

import (
	"fmt"
	"time"
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
)

// NewConfig returns the defaults.
func NewConfig() Config {
	return Config{
		stepCap: DefaultStepCap, streamIdle: DefaultStreamIdle, stepWall: DefaultStepWall,
		toolTimeout: DefaultToolTimeout, outputCap: DefaultOutputCap,
		checkpointEvery: DefaultCheckpointEvery, checkpointBytes: DefaultCheckpointBytes,
	}
}

// WithStepCap sets the durable cap on model steps per turn; the turn fails
// with failed{type:"step_limit"} instead of starting one more. Default 100.
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

// WithSystemPrompt sets the system prompt sent with every request. Default
// none.
func (c Config) WithSystemPrompt(s string) Config { c.system = s; return c }

func (c Config) validate() error {
	switch {
	case c.stepCap <= 0:
		return fmt.Errorf("step cap %d must be positive", c.stepCap)
	case c.streamIdle <= 0 || c.stepWall <= 0 || c.toolTimeout <= 0 || c.checkpointEvery <= 0:
		return fmt.Errorf("timeouts must be positive")
	case c.outputCap <= 0 || c.checkpointBytes <= 0:
		return fmt.Errorf("output cap and checkpoint bytes must be positive")
	}
	return nil
}
