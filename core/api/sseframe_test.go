package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
)

// marshalFrame is the frame as send wrote it before appendFrame:
// json.Marshal of the event and the lines through fmt.
func marshalFrame(ev event.Event) ([]byte, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if !ev.IsEphemeral() {
		fmt.Fprintf(&b, "id: %d\n", ev.Seq)
	}
	fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", ev.Type, data)
	return []byte(b.String()), nil
}

// frameStrings are texts that exercise json.Marshal's escaping.
var frameStrings = []string{
	"", "plain", "You said: hello ", `quote " and \ backslash`, "<script>&amp;</script>", "a < b", "a > b", "fish & chips",
	"line\nbreak\ttab\rcr", "\x00\x01\x1f\x7f", "\b\f", "héllo wörld ✓ 日本語 🎉",
	"sep\u2028and\u2029para", "bad utf-8 \xff\xfe end", "\xe2\x80", "\xe2\x80\xa8",
	strings.Repeat("long text ", 10000),
}

// frameEvents are events of every shape: ephemeral and stored, with data
// from json.Marshal (as core writes it) and as stored text with spaces.
func frameEvents(t *testing.T) []event.Event {
	var evs []event.Event
	for i, s := range frameStrings {
		data, err := json.Marshal(map[string]any{"text": s, "n": i, "nested": []any{s, nil, true, 1.5}})
		require.NoError(t, err)
		evs = append(evs,
			event.Event{SessionID: "ses_1", Type: event.Type("session.message.delta"), At: 1700000000000, Data: data},
			event.Event{ID: "evt_" + fmt.Sprint(i), SessionID: "ses_1.sub", Seq: int64(i + 1), Type: "session.message.completed", At: int64(i), Data: data},
			event.Event{ID: s, SessionID: s, Seq: -int64(i) - 1, Type: event.Type(s), At: -5, Data: data},
		)
	}
	for _, raw := range []string{
		`{}`, `[]`, `null`, `"x"`, `0`, `{"a" : [ 1 , 2 ] ,  "b":"<&>"}`, "\n {\"t\":\"a\u2028b\"}\t",
		`{"text":"\u003c already escaped \u2028"}`, `{"t":"a<b"}`, `{"t":"a>b"}`, `{"t":"a&b"}`, "{\"t\":\"\u2029\"}", `{"big":"` + strings.Repeat("é", 1<<16) + `"}`,
	} {
		evs = append(evs, event.Event{ID: "evt_x", SessionID: "ses_1", Seq: 9, Type: "t", At: 1, Data: json.RawMessage(raw)})
	}
	evs = append(evs,
		event.Event{SessionID: "ses_1", Type: "t"},                  // nil data: null
		event.Event{Seq: 1 << 62, At: 1<<63 - 1, Data: []byte(`1`)}, // empty strings, big numbers
	)
	return evs
}

// TestAppendFrameIsMarshal: the hand-written frame is byte for byte what
// json.Marshal and fmt wrote, for every shape of event.
func TestAppendFrameIsMarshal(t *testing.T) {
	var buf []byte
	for i, ev := range frameEvents(t) {
		want, err := marshalFrame(ev)
		require.NoError(t, err, "event %d", i)
		got, err := appendFrame(buf[:0], ev)
		require.NoError(t, err, "event %d", i)
		require.Equal(t, string(want), string(got), "event %d", i)
		buf = got // reused, as send does
	}
}

// TestAppendFrameBadData: data that is not JSON fails as json.Marshal
// does, leaving the buffer as it was.
func TestAppendFrameBadData(t *testing.T) {
	for _, raw := range []string{"", " ", `{"a":`, `{"a":1}x`, "\xff", `{'a':1}`} {
		ev := event.Event{ID: "evt_1", SessionID: "ses_1", Seq: 3, Type: "t", Data: json.RawMessage(raw)}
		_, merr := json.Marshal(ev)
		require.Error(t, merr, "%q", raw)
		got, err := appendFrame([]byte("kept"), ev)
		assert.Error(t, err, "%q", raw)
		assert.Equal(t, "kept", string(got), "%q", raw)
	}
}

// FuzzAppendFrame compares appendFrame with json.Marshal on arbitrary
// strings and data.
func FuzzAppendFrame(f *testing.F) {
	for _, s := range frameStrings[:len(frameStrings)-1] {
		f.Add(s, `{"text":`+fmt.Sprintf("%q", s)+`}`, int64(0))
	}
	f.Add("a", " [1, {\"b\" : \"<\u2029>\"} ] ", int64(7))
	f.Fuzz(func(t *testing.T, s, raw string, seq int64) {
		ev := event.Event{ID: s, SessionID: s, Seq: seq, Type: event.Type(s), At: seq, Data: json.RawMessage(raw)}
		want, werr := marshalFrame(ev)
		got, err := appendFrame(nil, ev)
		if werr != nil {
			if err == nil {
				t.Fatalf("appendFrame accepted what json.Marshal refused (%v): %q", werr, raw)
			}
			return
		}
		if err != nil {
			t.Fatalf("appendFrame: %v (json.Marshal took %q)", err, raw)
		}
		if string(got) != string(want) {
			t.Fatalf("frames differ for %q / %q:\n got %q\nwant %q", s, raw, got, want)
		}
	})
}
