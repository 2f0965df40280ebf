package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A share of the default campaign's trees runs with a resume budget of 1
// or 2, the same trees for a seed; a budget set for the campaign wins.
func TestSmallBudgetShare(t *testing.T) {
	cfg := DefaultConfig(1)
	small := 0
	for i := range cfg.Sessions {
		b := cfg.budgetFor(i)
		assert.Contains(t, []int{0, 1, 2}, b, "session %d", i)
		assert.Equal(t, b, cfg.budgetFor(i), "session %d: the draw repeats", i)
		if b > 0 {
			small++
		}
	}
	assert.InDelta(t, float64(cfg.Sessions)*DefaultSmall, small, 20, "about the share")

	cfg.ResumeBudget = 5
	for i := range cfg.Sessions {
		assert.Equal(t, 5, cfg.budgetFor(i))
	}
	cfg.ResumeBudget, cfg.SmallBudget = 0, 0
	for i := range cfg.Sessions {
		assert.Zero(t, cfg.budgetFor(i))
	}
}

// A share of the default campaign's trees makes the ask on ahook final,
// the same trees for a seed; none without the share.
func TestFinalAskShare(t *testing.T) {
	cfg := DefaultConfig(1)
	final := 0
	for i := range cfg.Sessions {
		f := cfg.finalAskFor(i)
		assert.Equal(t, f, cfg.finalAskFor(i), "session %d: the draw repeats", i)
		if f {
			final++
		}
	}
	assert.InDelta(t, float64(cfg.Sessions)*DefaultFinalAsk, final, 20, "about the share")
	cfg.FinalAsk = 0
	for i := range cfg.Sessions {
		assert.False(t, cfg.finalAskFor(i))
	}
}

// Every share is refused outside 0…1, NaN included: strconv.ParseFloat
// reads "NaN" from a -flag, and NaN compares false with both bounds.
func TestSharesOutsideZeroToOneRefused(t *testing.T) {
	shares := map[string]func(*Config) *float64{
		"zombie":       func(c *Config) *float64 { return &c.Zombies },
		"disk-full":    func(c *Config) *float64 { return &c.DiskFull },
		"scripted":     func(c *Config) *float64 { return &c.Scripted },
		"boot-fault":   func(c *Config) *float64 { return &c.BootFault },
		"boot-lock":    func(c *Config) *float64 { return &c.BootLock },
		"final-ask":    func(c *Config) *float64 { return &c.FinalAsk },
		"delete":       func(c *Config) *float64 { return &c.Deletes },
		"delete-fault": func(c *Config) *float64 { return &c.DeleteFault },
		"flood":        func(c *Config) *float64 { return &c.Flood },
		"reopen-race":  func(c *Config) *float64 { return &c.ReopenRace },
		"small-budget": func(c *Config) *float64 { return &c.SmallBudget },
	}
	for name, share := range shares {
		for _, bad := range []float64{math.NaN(), -0.5, 1.5, math.Inf(1)} {
			cfg := DefaultConfig(1)
			// The shares of shares need the share they are of.
			cfg.Deletes, cfg.DeleteFault, cfg.Scripted = 0.5, 0.5, 0.5
			*share(&cfg) = bad
			err := cfg.Validate()
			if assert.Error(t, err, "%s share %v", name, bad) {
				assert.Contains(t, err.Error(), "must be within 0…1", "%s share %v", name, bad)
			}
		}
	}
	assert.NoError(t, DefaultConfig(1).Validate())
}
