package logs

import (
	"context"
	"encoding"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// The lite text handler: log/slog's text formats for the lite logger, so a
// build without log/slog (the Worker's) writes the lines slog would.
// text_test.go checks each line against slog's own handlers.

// liteText writes each record as one line to w, as slog.TextHandler with
// nil options does (std false): "time=… level=INFO msg=… k=v", records
// below Info dropped; or as slog's default logger does through package
// log with its standard flags (std true): "2006/01/02 15:04:05 INFO msg
// k=v". now stamps the record; nil leaves the time out, as slog does for a
// record without one.
type liteText struct {
	w      io.Writer
	now    func() time.Time
	std    bool
	mu     *sync.Mutex
	pre    []byte // attributes from WithAttrs, formatted
	prefix string // the groups from WithGroup, each followed by "."
}

func newLiteText(w io.Writer, now func() time.Time, std bool) *liteText {
	return &liteText{w: w, now: now, std: std, mu: new(sync.Mutex)}
}

func (h *liteText) Enabled(_ context.Context, l liteLevel) bool { return l >= liteInfo }

func (h *liteText) Handle(_ context.Context, r liteRecord) error {
	var b []byte
	sep := ""
	if h.std {
		if h.now != nil {
			b = h.now().AppendFormat(b, "2006/01/02 15:04:05 ")
		}
		b = append(b, r.Level.String()...)
		b = append(b, ' ')
		b = append(b, r.Message...)
		sep = " "
	} else {
		if h.now != nil {
			b = append(b, "time="...)
			b = h.now().Round(0).AppendFormat(b, millisLayout)
			sep = " "
		}
		b = append(b, sep...)
		b = append(b, "level="...)
		b = appendText(b, r.Level.String())
		b = append(b, " msg="...)
		b = appendText(b, r.Message)
		sep = " "
	}
	if len(h.pre) > 0 {
		b = append(b, sep...)
		b = append(b, h.pre...)
	}
	for _, a := range r.attrs {
		b, _ = appendTextAttr(b, sep, h.prefix, a)
	}
	if !h.std || len(b) == 0 || b[len(b)-1] != '\n' { // package log adds a newline only where one is missing
		b = append(b, '\n')
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b)
	return err
}

func (h *liteText) WithAttrs(as []liteAttr) liteHandler {
	sep := ""
	if len(h.pre) > 0 {
		sep = " "
	}
	pre, any := append([]byte(nil), h.pre...), false
	for _, a := range as {
		var ok bool
		if pre, ok = appendTextAttr(pre, sep, h.prefix, a); ok {
			sep, any = " ", true
		}
	}
	if !any {
		return h
	}
	h2 := *h
	h2.pre = pre
	return &h2
}

// WithGroup puts the keys that follow under name, "" too (as slog's
// handlers do; slog's Logger.WithGroup skips "").
func (h *liteText) WithGroup(name string) liteHandler {
	h2 := *h
	h2.prefix += name + "."
	return &h2
}

// appendTextAttr appends sep and a as slog's text handler does (a group's
// attributes each under "group."), or nothing for a group of nothing,
// reporting whether it appended.
func appendTextAttr(b []byte, sep, prefix string, a liteAttr) ([]byte, bool) {
	a.Value = a.Value.Resolve()
	v := a.Value
	// slog elides only an Attr{}; the lite logger's is a string's, as
	// String("", "") is, which slog writes.
	if v.group != nil {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		n, appended := len(b), false
		for _, g := range v.group {
			var ok bool
			if b, ok = appendTextAttr(b, sep, prefix, g); ok {
				sep, appended = " ", true
			}
		}
		if !appended {
			return b[:n], false
		}
		return b, true
	}
	b = append(b, sep...)
	if prefix != "" {
		if needsQuoting(prefix) || needsQuoting(a.Key) {
			b = strconv.AppendQuote(b, prefix+a.Key)
		} else {
			b = append(append(b, prefix...), a.Key...)
		}
	} else {
		b = appendText(b, a.Key)
	}
	b = append(b, '=')
	return appendTextValue(b, v), true
}

// appendTextValue appends a resolved, non-group value as slog's text
// handler does, by the kind slog.AnyValue gives it.
func appendTextValue(b []byte, v liteValue) (out []byte) {
	if v.any == nil {
		return appendText(b, v.s)
	}
	n := len(b)
	defer func() {
		if p := recover(); p != nil {
			if rv := reflect.ValueOf(v.any); rv.Kind() == reflect.Pointer && rv.IsNil() {
				out = appendText(b[:n], "<nil>")
				return
			}
			out = appendText(b[:n], fmt.Sprintf("!PANIC: %v", p))
		}
	}()
	switch x := v.any.(type) {
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int8:
		return strconv.AppendInt(b, int64(x), 10)
	case int16:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case uintptr:
		return strconv.AppendUint(b, uint64(x), 10)
	case float32:
		return strconv.AppendFloat(b, float64(x), 'g', -1, 64)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, x)
	case time.Duration:
		return append(b, x.String()...)
	case time.Time:
		return x.Round(0).AppendFormat(b, millisLayout)
	case encoding.TextMarshaler:
		text, err := x.MarshalText()
		if err != nil {
			return appendText(b, fmt.Sprintf("!ERROR:%v", err))
		}
		return appendText(b, string(text))
	case []byte:
		return strconv.AppendQuote(b, string(x))
	}
	if t := reflect.TypeOf(v.any); t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		return strconv.AppendQuote(b, string(reflect.ValueOf(v.any).Bytes()))
	}
	return appendText(b, fmt.Sprintf("%+v", v.any))
}

// appendText appends s, quoted if slog's text handler would quote it.
func appendText(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// needsQuoting is slog's text rule: the empty string, and any string with
// a space, '=', '"', an ASCII control character, a non-printable rune or
// invalid UTF-8, is quoted; a backslash alone is not.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == ' ' || c == '=' || c == '"' || c < ' ' {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// millisLayout is RFC 3339 with exactly three digits of milliseconds:
// Go's layouts truncate a fraction, as slog's handlers do.
const millisLayout = "2006-01-02T15:04:05.000Z07:00"
