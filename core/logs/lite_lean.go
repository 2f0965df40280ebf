//go:build wasip1 || js

package logs

import (
	"io"
	"time"
)

// In the wasip1 guest and the Worker (js) the types are the lite logger's
// (doc.go).
type (
	Logger    = liteLogger
	Handler   = liteHandler
	Record    = liteRecord
	Attr      = liteAttr
	Value     = liteValue
	Level     = liteLevel
	LogValuer = liteValuer
)

// The levels.
const (
	LevelDebug = liteDebug
	LevelInfo  = liteInfo
	LevelWarn  = liteWarn
	LevelError = liteError
)

// New returns a logger that hands records to h.
func New(h Handler) *Logger { return liteNew(h) }

// Discard returns a logger that drops every record.
func Discard() *Logger { return liteNew(liteDiscard{}) }

// String returns an attribute of a string value.
func String(key, value string) Attr { return liteString(key, value) }

// StringValue returns a string value.
func StringValue(s string) Value { return liteStringValue(s) }

// GroupValue returns a value of several attributes.
func GroupValue(as ...Attr) Value { return liteGroupValue(as...) }

// NewTextHandler returns a handler that writes slog.TextHandler's lines
// (nil options: Info and above) to w, each stamped with now().
func NewTextHandler(w io.Writer, now func() time.Time) Handler { return newLiteText(w, now, false) }

// NewLogHandler returns a handler that writes the lines of slog's default
// logger (package log's standard logger, Info and above) to w, each dated
// with now().
func NewLogHandler(w io.Writer, now func() time.Time) Handler { return newLiteText(w, now, true) }
