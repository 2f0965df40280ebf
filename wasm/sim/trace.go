package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// The trace of one tree (Config.Trace): what its guests logged, and what
// the simulator did to and for them, each line stamped with the tree's
// virtual time since start, so a violation reported for a seed can be
// followed to its cause. It only writes: it draws nothing, reads no
// database and changes no decision, so a traced campaign's history is the
// untraced one's. The guests' log lines reach the host through the log
// import (wasm/runtime's Options.Log); a guest whose tree is not traced
// keeps the runtime's discarding logger, as before.

// tracef writes one line of the tree's trace, if it is traced.
func (t *tree) tracef(format string, args ...any) {
	if t.trace == nil {
		return
	}
	fmt.Fprintf(t.trace, "%s %s "+format+"\n", append([]any{t.id, traceAt(t.now)}, args...)...)
}

// name is how the trace names g: its boot, and whether it is a zombie.
func (g *guest) name() string {
	if g.zombie {
		return fmt.Sprintf("boot %d (zombie)", g.boot)
	}
	return fmt.Sprintf("boot %d", g.boot)
}

// traceLogger is the logger of g's guest when its tree is traced (nil:
// the runtime discards the logs).
func (g *guest) traceLogger() *slog.Logger {
	if g.t.trace == nil {
		return nil
	}
	return slog.New(traceHandler{g: g})
}

// traceHandler writes the log records of a guest (the guest's own, which
// arrive as one line of text, and the runtime's about it) to the trace.
type traceHandler struct {
	g     *guest
	attrs string
}

func (h traceHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendTraceAttr(&b, a)
		return true
	})
	h.g.t.tracef("%s log %s: %s", h.g.name(), r.Level, b.String())
	return nil
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		appendTraceAttr(&b, a)
	}
	return traceHandler{g: h.g, attrs: b.String()}
}

// WithGroup is the handler itself: the runtime logs with no groups.
func (h traceHandler) WithGroup(string) slog.Handler { return h }

func appendTraceAttr(b *strings.Builder, a slog.Attr) {
	fmt.Fprintf(b, " %s=%q", a.Key, a.Value.String())
}

// traceSite names a host call of the guest's, for a kill there.
func traceSite(s runtime.Site) string {
	side := "before"
	if s.After {
		side = "after"
	}
	return fmt.Sprintf("%s %s (phase %s)", side, s.Import, s.Phase)
}

// traceAt is a virtual time as the trace writes it.
func traceAt(at int64) string { return fmt.Sprintf("+%.3fs", float64(at-start)/1000) }

// traceRequest names a client request.
func traceRequest(r *request) string { return r.req.Method + " " + r.req.Path }

// traceEgress names an egress request.
func traceEgress(req runtime.EgressRequest) string {
	switch req.Kind {
	case abi.EgressModel:
		return "model request to " + req.URL
	case abi.EgressTool:
		return "tool call to " + req.Target
	}
	return fmt.Sprintf("request of kind %d to %s", req.Kind, req.Target)
}

// clipTrace is a response body as the trace shows it: one line, at most
// 200 bytes.
func clipTrace(body []byte) string {
	s := strings.TrimSpace(strings.ReplaceAll(string(body), "\n", " "))
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
