//go:build wasip1

package main

import (
	"context"
	"log/slog"

	"github.com/revenantrt/revenant/core/logs"
)

// slogBridge hands core/api's slog records to the guest's logs.Handler.
// It exists only while core/api's Deps.Log is a *slog.Logger: once it is a
// *logs.Logger (core/logs' doc), delete this file and pass gg.log, and the
// guest no longer links log/slog.
type slogBridge struct{ h logs.Handler }

func apiLog(l *logs.Logger) *slog.Logger { return slog.New(slogBridge{l.Handler()}) }

func (b slogBridge) Enabled(ctx context.Context, l slog.Level) bool {
	return b.h.Enabled(ctx, logs.Level(l))
}

func (b slogBridge) Handle(ctx context.Context, r slog.Record) error {
	args := make([]any, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, a.Key, a.Value.Resolve().String())
		return true
	})
	logs.New(b.h).Log(ctx, logs.Level(r.Level), r.Message, args...)
	return nil
}

func (b slogBridge) WithAttrs(as []slog.Attr) slog.Handler {
	args := make([]any, 0, 2*len(as))
	for _, a := range as {
		args = append(args, a.Key, a.Value.Resolve().String())
	}
	return slogBridge{logs.New(b.h).With(args...).Handler()}
}

func (b slogBridge) WithGroup(string) slog.Handler { return b }
