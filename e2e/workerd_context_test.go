package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerdContextLeavesOutOldExchanges: in a Durable Object, a session
// past context_bytes leaves its oldest exchanges out of the request (the
// transcript's sizes are read on the object's SQLite first). The offline
// model counts the request's words as its input tokens: each turn's
// request holds the notice and its own prompt, not the history before.
func TestWorkerdContextLeavesOutOldExchanges(t *testing.T) {
	t.Parallel() // see workerd_test.go
	w := startWorkerdTOML(t, "", "REVENANT_SETTINGS = { context_bytes = 2000 }", "REVENANT_OFFLINE_WORD_DELAY:1ms")
	s := w.client(t)
	sid := s.create()
	for i := range 3 {
		text := strings.TrimSpace(strings.Repeat(fmt.Sprintf("w%d ", i), 250)) // 250 words, 749 bytes
		a := s.prompt(sid, text)
		sum := s.settle(sid, a)
		ta := sum.requireEnd(t, a, typeSucceeded, "")
		require.Len(t, ta.done, 1)
		require.Equal(t, "You said: "+text, ta.done[0].P.Text)
		var usage struct {
			InputTokens int `json:"input_tokens"`
		}
		require.NoError(t, json.Unmarshal(ta.done[0].Data, &usage))
		// The whole history would be 250 + 252 words per earlier turn.
		require.Less(t, usage.InputTokens, 300, "turn %d's request holds its prompt and the notice only", i)
	}
}
