package sim

import (
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
