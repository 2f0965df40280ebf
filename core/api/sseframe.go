package api

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/revenantrt/revenant/core/event"
)

// appendFrame appends ev's Server-Sent Events frame to dst: "id: <seq>"
// for a durable event, then "event: <type>" and "data: <the event as
// JSON>", and a blank line.
//
// Every text delta of an answer is one frame, so this is on the
// per-chunk path: it writes the event's JSON by hand rather than through
// json.Marshal's reflection, and the caller writes the frame in one call.
// The JSON is byte for byte json.Marshal(ev)'s (TestAppendFrameIsMarshal
// and FuzzAppendFrame compare them): the same field order and omitempty
// rules, strings as Marshal escapes them, and Data compacted with <, >, &,
// U+2028 and U+2029 escaped, which is what Marshal does with a
// json.RawMessage. Like Marshal it fails on Data that is not valid JSON,
// and then dst is returned as it was.
func appendFrame(dst []byte, ev event.Event) ([]byte, error) {
	start := len(dst)
	if !ev.IsEphemeral() {
		dst = append(dst, "id: "...)
		dst = strconv.AppendInt(dst, ev.Seq, 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, "event: "...)
	dst = append(dst, ev.Type...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, '{')
	if ev.ID != "" {
		dst = append(dst, `"id":`...)
		dst = appendJSONString(dst, ev.ID)
		dst = append(dst, ',')
	}
	dst = append(dst, `"session_id":`...)
	dst = appendJSONString(dst, ev.SessionID)
	if ev.Seq != 0 {
		dst = append(dst, `,"seq":`...)
		dst = strconv.AppendInt(dst, ev.Seq, 10)
	}
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, string(ev.Type))
	dst = append(dst, `,"at":`...)
	dst = strconv.AppendInt(dst, ev.At, 10)
	dst = append(dst, `,"data":`...)
	dst, err := appendRawJSON(dst, ev.Data)
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, "}\n\n"...)
	return dst, nil
}

// appendJSONString appends s as json.Marshal writes a string. Ids,
// session ids and event types are plain ASCII, written as they are; any
// other string goes through json.Marshal itself, so no escaping rule is
// restated here.
func appendJSONString(dst []byte, s string) []byte {
	if !plainJSONString(s) {
		b, _ := json.Marshal(s) // a string always marshals
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// plainJSONString reports whether json.Marshal writes s between quotes
// unchanged: printable ASCII other than the quote, the backslash and the
// characters it escapes for HTML.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendRawJSON appends raw as json.Marshal writes a json.RawMessage:
// null for nil, else compacted (which also checks it is valid JSON) with
// <, >, &, U+2028 and U+2029 escaped. The escape pass copies only when
// one of those is there: a delta's data seldom has one.
func appendRawJSON(dst []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(dst, "null"...), nil
	}
	buf := bytes.NewBuffer(dst)
	start := len(dst)
	if err := json.Compact(buf, raw); err != nil {
		return dst, err
	}
	out := buf.Bytes()
	if !needsHTMLEscape(out[start:]) {
		return out, nil
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, out[start:])
	return append(out[:start], esc.Bytes()...), nil
}

// needsHTMLEscape reports whether json.HTMLEscape would change b.
func needsHTMLEscape(b []byte) bool {
	for i, c := range b {
		switch {
		case c == '<', c == '>', c == '&':
			return true
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8:
			return true
		}
	}
	return false
}
