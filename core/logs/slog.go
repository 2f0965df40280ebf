//go:build !wasip1 && !js

package logs

import "log/slog"

// Outside the wasip1 guest the types are log/slog's (doc.go).
type (
	Logger    = slog.Logger
	Handler   = slog.Handler
	Record    = slog.Record
	Attr      = slog.Attr
	Value     = slog.Value
	Level     = slog.Level
	LogValuer = slog.LogValuer
)

// The levels.
const (
	LevelDebug = slog.LevelDebug
	LevelInfo  = slog.LevelInfo
	LevelWarn  = slog.LevelWarn
	LevelError = slog.LevelError
)

// New returns a logger that hands records to h.
func New(h Handler) *Logger { return slog.New(h) }

// Discard returns a logger that drops every record.
func Discard() *Logger { return slog.New(slog.DiscardHandler) }

// String returns an attribute of a string value.
func String(key, value string) Attr { return slog.String(key, value) }

// StringValue returns a string value.
func StringValue(s string) Value { return slog.StringValue(s) }

// GroupValue returns a value of several attributes.
func GroupValue(as ...Attr) Value { return slog.GroupValue(as...) }
