package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A prompt admitted while the session's turn is parked is queued, not
// promoted (DESIGN §9): the park released the claim, and the admission
// must not take it, or its start would continue the parked turn past the
// blocker still pending.
func TestPromptAdmittedWhileParkedWaitsUnclaimed(t *testing.T) {
	p := parkOn(t, "q")
	queued := p.n.Admit("s", "next")

	p.noStart(t)
	assert.False(t, p.tr.Claim("s").Exists, "the parked session stays unclaimed")
	assert.Equal(t, "queued", p.tr.PromptState(queued))
	assert.Len(t, p.pending(t), 1, "the question still waits")
}
