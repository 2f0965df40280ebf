package logs

import (
	"context"
	"fmt"
	"strconv"
)

// The lite logger: the wasip1 guest's Logger and its types (lite_wasip1.go
// names them). Every build compiles it, so its tests run natively.

// liteLevel is a record's importance; the same numbers as slog.Level.
type liteLevel int

const (
	liteDebug liteLevel = -4
	liteInfo  liteLevel = 0
	liteWarn  liteLevel = 4
	liteError liteLevel = 8
)

// String names the level as slog does: "INFO", "WARN+2".
func (l liteLevel) String() string {
	name := func(base string, d liteLevel) string {
		switch {
		case d == 0:
			return base
		case d < 0:
			return base + strconv.Itoa(int(d))
		}
		return base + "+" + strconv.Itoa(int(d))
	}
	switch {
	case l < liteInfo:
		return name("DEBUG", l-liteDebug)
	case l < liteWarn:
		return name("INFO", l-liteInfo)
	case l < liteError:
		return name("WARN", l-liteWarn)
	default:
		return name("ERROR", l-liteError)
	}
}

// liteValuer is a value that logs as another value (slog.LogValuer).
type liteValuer interface {
	LogValue() liteValue
}

// liteValue is an attribute's value: a string, a group, or anything else.
type liteValue struct {
	s     string
	any   any // nil for a string or a group
	group []liteAttr
}

func liteStringValue(s string) liteValue { return liteValue{s: s} }

func liteGroupValue(as ...liteAttr) liteValue {
	return liteValue{group: append([]liteAttr(nil), as...)}
}

func liteAnyValue(v any) liteValue {
	switch x := v.(type) {
	case nil:
		return liteValue{any: liteNil{}}
	case string:
		return liteValue{s: x}
	case liteValue:
		return x
	}
	return liteValue{any: v}
}

// liteNil is a nil value (a nil error, say): "<nil>", as slog writes it,
// where the zero liteValue is the empty string.
type liteNil struct{}

func (liteNil) String() string { return "<nil>" }

// maxResolve bounds LogValue chains, as slog does.
const maxResolve = 100

// Resolve calls LogValue until the value is not a LogValuer. A LogValue
// that panics (a nil pointer to a value-receiver LogValuer, say) gives a
// value saying so, as slog does: a log call never takes the guest down.
func (v liteValue) Resolve() (resolved liteValue) {
	defer func() {
		if p := recover(); p != nil {
			resolved = liteStringValue(fmt.Sprintf("LogValue panicked\n%v", p))
		}
	}()
	for range maxResolve {
		lv, ok := v.any.(liteValuer)
		if !ok {
			return v
		}
		v = lv.LogValue()
	}
	return liteStringValue("LogValue called too many times")
}

// String formats the resolved value: a group as [k=v k=v], anything else
// as fmt's %v.
func (v liteValue) String() string {
	v = v.Resolve()
	switch {
	case v.group != nil:
		b := []byte{'['}
		for i, a := range v.group {
			if i > 0 {
				b = append(b, ' ')
			}
			b = append(b, a.String()...)
		}
		return string(append(b, ']'))
	case v.any != nil:
		return fmt.Sprint(v.any)
	}
	return v.s
}

// liteAttr is a key and a value.
type liteAttr struct {
	Key   string
	Value liteValue
}

func liteString(key, value string) liteAttr { return liteAttr{key, liteStringValue(value)} }

// String is key=value.
func (a liteAttr) String() string { return a.Key + "=" + a.Value.String() }

// badKey is the key of a value given without one, as in slog.
const badKey = "!BADKEY"

// liteAttrs turns a log call's arguments into attributes with slog's rules:
// a string is a key followed by its value, an Attr stands alone, anything
// else is a value without a key. Values are resolved.
func liteAttrs(args []any) []liteAttr {
	var out []liteAttr
	for len(args) > 0 {
		var a liteAttr
		switch x := args[0].(type) {
		case string:
			if len(args) == 1 {
				a, args = liteAttr{badKey, liteStringValue(x)}, nil
			} else {
				a, args = liteAttr{x, liteAnyValue(args[1])}, args[2:]
			}
		case liteAttr:
			a, args = x, args[1:]
		default:
			a, args = liteAttr{badKey, liteAnyValue(x)}, args[1:]
		}
		a.Value = a.Value.Resolve()
		out = append(out, a)
	}
	return out
}

// liteRecord is one log call.
type liteRecord struct {
	Level   liteLevel
	Message string
	attrs   []liteAttr
}

// Attrs calls f on each attribute until f returns false.
func (r liteRecord) Attrs(f func(liteAttr) bool) {
	for _, a := range r.attrs {
		if !f(a) {
			return
		}
	}
}

// NumAttrs is the number of attributes.
func (r liteRecord) NumAttrs() int { return len(r.attrs) }

// liteHandler handles records (slog.Handler's shape).
type liteHandler interface {
	Enabled(context.Context, liteLevel) bool
	Handle(context.Context, liteRecord) error
	WithAttrs([]liteAttr) liteHandler
	WithGroup(string) liteHandler
}

// liteLogger hands records to its handler.
type liteLogger struct{ h liteHandler }

func liteNew(h liteHandler) *liteLogger {
	if h == nil {
		panic("logs: nil Handler") // as slog.New
	}
	return &liteLogger{h}
}

// Handler returns the logger's handler.
func (l *liteLogger) Handler() liteHandler { return l.h }

// With returns a logger whose records carry args' attributes too.
func (l *liteLogger) With(args ...any) *liteLogger {
	if len(args) == 0 {
		return l
	}
	return &liteLogger{l.h.WithAttrs(liteAttrs(args))}
}

// Enabled reports whether the handler takes records of level.
func (l *liteLogger) Enabled(ctx context.Context, level liteLevel) bool {
	if ctx == nil {
		ctx = context.Background()
	}
	return l.h.Enabled(ctx, level)
}

// Log logs msg at level with args' attributes.
func (l *liteLogger) Log(ctx context.Context, level liteLevel, msg string, args ...any) {
	l.log(ctx, level, msg, args)
}

// Debug logs at LevelDebug.
func (l *liteLogger) Debug(msg string, args ...any) { l.log(nil, liteDebug, msg, args) }

// Info logs at LevelInfo.
func (l *liteLogger) Info(msg string, args ...any) { l.log(nil, liteInfo, msg, args) }

// Warn logs at LevelWarn.
func (l *liteLogger) Warn(msg string, args ...any) { l.log(nil, liteWarn, msg, args) }

// Error logs at LevelError.
func (l *liteLogger) Error(msg string, args ...any) { l.log(nil, liteError, msg, args) }

func (l *liteLogger) log(ctx context.Context, level liteLevel, msg string, args []any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.h.Enabled(ctx, level) {
		return
	}
	_ = l.h.Handle(ctx, liteRecord{Level: level, Message: msg, attrs: liteAttrs(args)}) // as slog: a handler's error is its own to report
}

// liteDiscard drops every record.
type liteDiscard struct{}

func (liteDiscard) Enabled(context.Context, liteLevel) bool  { return false }
func (liteDiscard) Handle(context.Context, liteRecord) error { return nil }
func (d liteDiscard) WithAttrs([]liteAttr) liteHandler       { return d }
func (d liteDiscard) WithGroup(string) liteHandler           { return d }
