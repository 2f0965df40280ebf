package openai

import "unicode/utf8"

// textDelta reads the event most of a streamed answer is made of: one
// choice, index 0, whose delta is plain text, with no finish reason, no
// usage and no error. It does so without encoding/json's reflection (an
// answer is hundreds of these events, json.Unmarshal was the largest part
// of decoding one). It is exact by refusing rather than guessing: ok is
// false for anything it does not fully check (another key, a tool call, a
// finish reason, an escape in the text, an invalid or unusual value), and
// handle then decodes the event in full. When ok, the event decodes in
// full to that text and nothing else (TestTextDeltaMatchesFullDecode,
// FuzzTextDelta).
func textDelta(data []byte) (text string, ok bool) {
	p := parser{b: data}
	seenChoices := false
	ok = p.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			if seenChoices {
				return false
			}
			seenChoices = true
			var found bool
			text, found = p.choices()
			return found
		case "usage":
			return p.null()
		case "id", "object", "created", "model", "system_fingerprint", "service_tier", "provider":
			return p.scalar()
		}
		return false
	})
	p.space()
	return text, ok && seenChoices && p.i == len(p.b)
}

// parser walks JSON; every method reports false on anything it does not
// accept, and the walk stops there.
type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next skips space and reports whether the next byte is c, taking it if
// so.
func (p *parser) next(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object reads an object whose keys are plain (no escapes), calling value
// for each key to read its value.
func (p *parser) object(value func(key []byte) bool) bool {
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return true
	}
	for {
		p.space()
		key, ok := p.plainString()
		if !ok || !p.next(':') {
			return false
		}
		p.space()
		if !value(key) {
			return false
		}
		if p.next('}') {
			return true
		}
		if !p.next(',') {
			return false
		}
	}
}

// choices reads an array of one choice: index 0, a text delta, no finish
// reason.
func (p *parser) choices() (text string, ok bool) {
	if !p.next('[') {
		return "", false
	}
	var seen keys
	ok = p.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return seen.first(0) && p.literal("0")
		case "finish_reason":
			return seen.first(1) && p.null()
		case "logprobs":
			return seen.first(2) && p.null()
		case "delta":
			var found bool
			text, found = p.delta()
			return seen.first(3) && found
		}
		return false
	})
	return text, ok && seen.has(0) && seen.has(3) && p.next(']')
}

// delta reads a delta with text content (or none) and at most a role
// besides.
func (p *parser) delta() (text string, ok bool) {
	var seen keys
	ok = p.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			if !seen.first(0) {
				return false
			}
			if p.null() {
				return true
			}
			s, ok := p.plainString()
			text = string(s)
			return ok
		case "role":
			_, ok := p.plainString()
			return seen.first(1) && ok
		}
		return false
	})
	return text, ok
}

// keys records which keys of an object were read: a key given twice is
// refused (json.Unmarshal would take the last).
type keys uint8

// first marks key k read and reports whether it was the first time.
func (s *keys) first(k uint) bool {
	if *s&(1<<k) != 0 {
		return false
	}
	*s |= 1 << k
	return true
}

func (s keys) has(k uint) bool { return s&(1<<k) != 0 }

// plainString reads a string that json.Unmarshal takes as it is: no
// escapes, no control characters, valid UTF-8.
func (p *parser) plainString() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[start:j]
			if !utf8.Valid(s) {
				return nil, false
			}
			p.i = j + 1
			return s, true
		case c == '\\', c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// scalar reads a plain string, null, or an unsigned integer (an id, a
// model name, a creation time).
func (p *parser) scalar() bool {
	if _, ok := p.plainString(); ok {
		return true
	}
	if p.null() {
		return true
	}
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - start
	return n > 0 && (n == 1 || p.b[start] != '0')
}

func (p *parser) null() bool { return p.literal("null") }

// literal reads exactly lit, which must not run on into more of a value.
func (p *parser) literal(lit string) bool {
	end := p.i + len(lit)
	if end > len(p.b) || string(p.b[p.i:end]) != lit {
		return false
	}
	if end < len(p.b) {
		switch c := p.b[end]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '.', c == '-', c == '+':
			return false
		}
	}
	p.i = end
	return true
}
