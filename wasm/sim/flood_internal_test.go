package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A prompt with the flood line gets its text answer as a stream of
// floodEvents server-sent events with text (more than a watch's
// subscription holds), the text first, then the finish and [DONE]; the
// line itself is no word of the answer. Any other prompt gets JSON. A
// flood of fewer events would leave -flood's campaigns short of the
// subscription's 1024.
func TestFloodPromptStreamsMoreEventsThanASubscriptionHolds(t *testing.T) {
	request := func(prompt string) []byte {
		b, err := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": prompt}}})
		require.NoError(t, err)
		return b
	}
	body, streamed, err := scriptedAnswer(request("hello\n" + floodLine))
	require.NoError(t, err)
	require.True(t, streamed)
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	require.Equal(t, "data: [DONE]", events[len(events)-1])
	var texts []string
	for _, e := range events[:len(events)-1] {
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(e, "data: ")), &ev), e)
		if c := ev.Choices[0].Delta.Content; c != "" {
			texts = append(texts, c)
		}
	}
	assert.Len(t, texts, floodEvents)
	assert.Greater(t, len(texts), 1024)
	assert.Equal(t, "You said: hello", texts[0])

	_, streamed, err = scriptedAnswer(request("hello"))
	require.NoError(t, err)
	assert.False(t, streamed)
}

// A flooded answer's call that emitted fewer live deltas than its events
// counts as a watch that fell behind; one that emitted them all, or any
// other answer, does not.
func TestNoteFloodCountsCallsShortOfTheirDeltas(t *testing.T) {
	tr := &tree{}
	tr.callDeltas = floodEvents
	tr.noteFlood(&reply{flood: floodEvents})
	tr.callDeltas = 1024
	tr.noteFlood(&reply{flood: floodEvents})
	tr.callDeltas = 0
	tr.noteFlood(&reply{})
	assert.Equal(t, 2, tr.floods)
	assert.Equal(t, 1, tr.fellBehind)
}
