package openai

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An event's data may reach maxEvent bytes, its lines' joining newlines
// counted, and not one byte more: the cap is the same for the data as for
// a line ("exceeds" in the error means more than maxEvent).
func TestEventDataCapIsExact(t *testing.T) {
	half := maxEvent / 2
	event := func(total int) string {
		// Two data lines, each well under the line cap, joined by "\n".
		return "data: " + strings.Repeat("a", half) + "\n" +
			"data: " + strings.Repeat("b", total-half-1) + "\n\n"
	}

	data, err := newEventReader(strings.NewReader(event(maxEvent))).next()
	require.NoError(t, err)
	assert.Len(t, data, maxEvent)

	_, err = newEventReader(strings.NewReader(event(maxEvent + 1))).next()
	require.ErrorIs(t, err, errEventTooLarge)
}

// A line of exactly maxEvent bytes, its ending included, is read; one
// byte more is refused before the reader holds more of it.
func TestLineCapIsExact(t *testing.T) {
	line := func(n int) string { return ": " + strings.Repeat("c", n-3) + "\n" } // a comment line of n bytes
	r := newEventReader(strings.NewReader(line(maxEvent) + "data: [DONE]\n\n"))
	data, err := r.next()
	require.NoError(t, err)
	assert.Equal(t, "[DONE]", string(data))

	_, err = newEventReader(strings.NewReader(line(maxEvent+1) + "data: [DONE]\n\n")).next()
	require.ErrorIs(t, err, errEventTooLarge)
}
