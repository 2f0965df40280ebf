package runner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/model"
)

// A tool call's arguments streamed a few bytes per delta, as providers send
// them, are gathered without copying what came before at each delta: the
// cost grows with the arguments, not with their square. Appending to a
// string cost one allocation (and a copy of everything so far) per delta,
// so a model writing a 400 KB argument took a minute of the server's CPU in
// one step. Counted in allocations, which do not depend on the machine.
func TestStreamedArgumentsAreGatheredWithoutRecopying(t *testing.T) {
	const deltas = 20000
	start := &model.ToolCallDelta{Index: 0, ID: "c0", Name: "kv_put", Arguments: `{"key":"k","value":"`}
	piece := &model.ToolCallDelta{Index: 0, Arguments: "abcd"}
	end := &model.ToolCallDelta{Index: 0, Arguments: `"}`}
	var s *streaming
	allocs := testing.AllocsPerRun(3, func() {
		s = &streaming{}
		s.apply(model.Chunk{ToolCall: start})
		for range deltas {
			s.apply(model.Chunk{ToolCall: piece})
		}
		s.apply(model.Chunk{ToolCall: end})
	})
	// A growing buffer doubles: about log2 of 80 KB allocations, and a few
	// for the call's record. One per delta would be 20,000.
	assert.Less(t, allocs, float64(100), "allocations to gather %d deltas", deltas)

	calls := s.toolCalls(func() string { return "id" })
	require.Len(t, calls, 1)
	assert.Equal(t, "kv_put", calls[0].Name)
	assert.Equal(t, `{"key":"k","value":"`+strings.Repeat("abcd", deltas)+`"}`, calls[0].Arguments)
}
