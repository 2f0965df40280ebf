package openai

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/model"
)

// textDeltaTaken are events textDelta reads itself, and their text: the
// shapes of the provider fixtures (openai_test.go's deltaChunk and
// textChunk), OpenAI's own chunk and the profiling tool's fake model.
var textDeltaTaken = map[string]string{
	`{"choices":[{"delta":{"content":"Hel"},"finish_reason":null,"index":0}],"id":"chatcmpl-1","model":"gpt-test","object":"chat.completion.chunk","usage":null}`:                                                                    "Hel",
	`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0}],"id":"chatcmpl-1","model":"gpt-test","object":"chat.completion.chunk","usage":null}`:                                                    "",
	`{"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1726000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" wörld ✓"},"logprobs":null,"finish_reason":null}]}`: " wörld ✓",
	`{"choices":[{"index":0,"delta":{"content":"You "}}]}`:                        "You ",
	" {\"choices\" : [ {\"index\" : 0 , \"delta\" : {\"content\" : null} } ] }\n": "",
	`{"choices":[{"index":0,"delta":{}}],"usage":null}`:                           "",
}

// textDeltaRefused are events it leaves to the full decoding: anything
// else a provider sends, and what it cannot read exactly.
var textDeltaRefused = []string{
	`{"choices":[{"index":0,"delta":{"content":"line\nbreak"}}]}`,                           // an escape
	`{"choices":[{"index":0,"delta":{"content":"quote \" here"}}]}`,                         // an escape
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,                           // a finish
	`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,                      // usage
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{}}]}}]}`, // a tool call
	`{"choices":[{"index":1,"delta":{"content":"x"}}]}`,                                     // another choice
	`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`, // two
	`{"error":{"message":"overloaded","type":"server_error"}}`,                              // an error
	`{"Choices":[{"index":0,"delta":{"content":"x"}}]}`,                                     // a key in another case
	`{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,                       // a key twice
	`{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[]}`,                        // a key twice
	`{"choices":[{"index":0,"delta":{"content":"x"}}]} trailing`,                            // trailing data
	`{"choices":[{"index":0.0,"delta":{"content":"x"}}]}`,                                   // not an int literal
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"created":1.5}`,                       // a float
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"model":{"name":"m"}}`,                // an object
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad \xff utf-8\"}}]}",              // invalid UTF-8
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tab\there\"}}]}",                   // a control character
	`{"choices":[{"index":0,"delta":{"content":"x"}}`,                                       // cut
	`{"choices":[{"index":0,"delta":{"content":"x","reasoning":"y"}}]}`,                     // another delta field
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"created":0123}`,                      // a leading zero: not JSON
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":5}`,                           // usage not null
	`[]`, `null`, `"x"`, `{}`,
}

// fullDecode is what handle did before textDelta: the event decoded in
// full, its chunks and whether it failed.
func fullDecode(data []byte) ([]model.Chunk, bool, error) {
	s := newStream(context.Background(), io.NopCloser(bytes.NewReader(nil)), "text/event-stream", func(s string) string { return s })
	err := s.decode(data)
	return s.pending, s.finished, err
}

// checkTextDelta: when textDelta takes an event, the full decoding gives
// exactly its text as one chunk (none for empty text) and nothing else.
func checkTextDelta(t *testing.T, data []byte) bool {
	t.Helper()
	text, ok := textDelta(data)
	if !ok {
		return false
	}
	chunks, finished, err := fullDecode(data)
	require.NoError(t, err, "%q", data)
	var want []model.Chunk
	if text != "" {
		want = []model.Chunk{{Text: text}}
	}
	require.Equal(t, want, chunks, "%q", data)
	require.False(t, finished, "%q", data)
	return true
}

func TestTextDeltaMatchesFullDecode(t *testing.T) {
	for data, text := range textDeltaTaken {
		got, ok := textDelta([]byte(data))
		require.True(t, ok, "taken: %s", data)
		assert.Equal(t, text, got, "%s", data)
		require.True(t, checkTextDelta(t, []byte(data)))
	}
	for _, data := range textDeltaRefused {
		_, ok := textDelta([]byte(data))
		assert.False(t, ok, "refused: %q", data)
	}
}

func FuzzTextDelta(f *testing.F) {
	for data := range textDeltaTaken {
		f.Add([]byte(data))
	}
	for _, data := range textDeltaRefused {
		f.Add([]byte(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkTextDelta(t, bytes.TrimSpace(data))
	})
}
