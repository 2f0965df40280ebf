package logs

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder keeps what the lite logger hands its handler.
type recorder struct {
	min     liteLevel
	records *[]liteRecord
	attrs   []liteAttr // from WithAttrs
}

func (h recorder) Enabled(_ context.Context, l liteLevel) bool { return l >= h.min }
func (h recorder) Handle(_ context.Context, r liteRecord) error {
	r.attrs = append(append([]liteAttr(nil), h.attrs...), r.attrs...)
	*h.records = append(*h.records, r)
	return nil
}
func (h recorder) WithAttrs(as []liteAttr) liteHandler {
	h.attrs = append(append([]liteAttr(nil), h.attrs...), as...)
	return h
}
func (h recorder) WithGroup(string) liteHandler { return h }

func lines(rs []liteRecord) []string {
	var out []string
	for _, r := range rs {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a liteAttr) bool { line += " " + a.String(); return true })
		out = append(out, line)
	}
	return out
}

// secret redacts itself, as tools/web.Secret and openai.Config do.
type secret string

func (secret) LogValue() liteValue { return liteStringValue("[redacted]") }

// config logs as a group holding a secret.
type config struct{ url, key string }

func (c config) LogValue() liteValue {
	return liteGroupValue(liteString("url", c.url), liteAttr{"key", liteAnyValue(secret(c.key))})
}

func TestLiteLoggerArgumentsAsSlog(t *testing.T) {
	var got []liteRecord
	l := liteNew(recorder{min: liteInfo, records: &got}).With("tree", "t1")
	l.Debug("dropped", "k", 1)
	l.Info("plain")
	l.Warn("pairs", "n", 3, "err", errors.New("boom"), liteString("s", "v"))
	l.Error("odd", "k", "v", "trailing")
	l.Log(context.Background(), liteWarn+2, "bare", 42)
	assert.Equal(t, []string{
		"INFO plain tree=t1",
		"WARN pairs tree=t1 n=3 err=boom s=v",
		"ERROR odd tree=t1 k=v !BADKEY=trailing",
		"WARN+2 bare tree=t1 !BADKEY=42",
	}, lines(got))
	assert.False(t, l.Enabled(context.Background(), liteDebug))
	assert.True(t, l.Enabled(nil, liteError)) //nolint:staticcheck // a nil context is allowed, as in slog
}

// A LogValuer is resolved before any handler sees it, in log calls and in
// With, inside groups too: the guest's handler prints values with %v, and a
// secret must never reach it unredacted.
func TestLiteLoggerResolvesLogValuers(t *testing.T) {
	var got []liteRecord
	l := liteNew(recorder{min: liteDebug, records: &got}).With("key", secret("sk-with"))
	l.Info("call", "model", config{url: "https://api", key: "sk-call"}, "token", secret("sk-token"))
	require.Len(t, got, 1)
	line := lines(got)[0]
	assert.Equal(t, "INFO call key=[redacted] model=[url=https://api key=[redacted]] token=[redacted]", line)
	assert.NotContains(t, line, "sk-")
}

// A LogValue that panics is logged as such, as slog does, not a panic of
// the log call: a nil *secret has a value-receiver LogValue.
func TestLiteLoggerSurvivesAPanickingLogValue(t *testing.T) {
	var got []liteRecord
	l := liteNew(recorder{min: liteDebug, records: &got})
	require.NotPanics(t, func() { l.Info("x", "k", (*secret)(nil)) })
	require.Len(t, got, 1)
	assert.Contains(t, lines(got)[0], "k=LogValue panicked")
}

// Levels and values print as slog prints them, so the guest's log lines
// read as a native host's.
func TestLiteFormatsAsSlog(t *testing.T) {
	for l := liteDebug - 3; l <= liteError+3; l++ {
		assert.Equal(t, slog.Level(l).String(), l.String())
	}
	assert.Equal(t, slog.GroupValue(slog.String("a", "x"), slog.Int("b", 2)).String(),
		liteGroupValue(liteString("a", "x"), liteAttr{"b", liteAnyValue(2)}).String())
	assert.Equal(t, slog.AnyValue(errors.New("e")).String(), liteAnyValue(errors.New("e")).String())
	assert.Equal(t, slog.StringValue("s").String(), liteStringValue("s").String())
}

func TestLiteDiscard(t *testing.T) {
	l := liteNew(liteDiscard{})
	assert.False(t, l.Enabled(context.Background(), liteError))
	l.Error("nothing", "k", "v") // must not panic
	assert.Same(t, l, l.With())
}
