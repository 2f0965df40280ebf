package check_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An instance that went quiet right at a step's completion (its commit
// the last before the quiet return) owes that step's delta: the watch ran
// before the return, so none emitted is caught.
func TestDeltaOwedWhenQuietAtItsCompletion(t *testing.T) {
	path, clean := fixture(t)
	steps, top := streamed(t, path)
	first := steps[0]
	vs := deltaViolations(t, path, *clean, deltaEmits(top, first.gseq, steps[1:]))
	if assert.Len(t, vs, 1) {
		assert.Contains(t, vs[0], "step "+first.step+" streamed")
	}
	assert.Empty(t, deltaViolations(t, path, *clean, deltaEmits(top, first.gseq, steps)))
}
