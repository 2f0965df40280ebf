package api

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
)

// An event that commits while a stream catches up reaches it twice: read
// from the log, then published live. The live copy of an event the stream
// already sent (its seq at or under the last one sent) writes nothing, so
// a client never sees an id twice; the next one is sent.
func TestLiveSkipsWhatTheLogAlreadySent(t *testing.T) {
	rec := httptest.NewRecorder()
	s := &stream{w: nethttp.Writer(rec), flush: func() {}, id: "s", last: 7}
	ev := func(seq int64) event.Event {
		return event.Event{ID: "e", SessionID: "s", Seq: seq, Type: "session.test@1", At: 1, Data: []byte(`{}`)}
	}
	require.NoError(t, s.live(nil, ev(6)))
	require.NoError(t, s.live(nil, ev(7)))
	assert.Empty(t, rec.Body.String(), "seq 6 and 7 were sent from the log already")
	assert.Equal(t, int64(7), s.last)

	require.NoError(t, s.live(nil, ev(8)))
	assert.Contains(t, rec.Body.String(), "id: 8\n")
	assert.Equal(t, int64(8), s.last)
}
