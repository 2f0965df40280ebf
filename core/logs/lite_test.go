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
	assert.Equal(t, slog.AnyValue(nil).String(), liteAnyValue(nil).String())
	assert.Equal(t, slog.AnyValue(error(nil)).String(), liteAnyValue(error(nil)).String())
}

func TestLiteDiscard(t *testing.T) {
	l := liteNew(liteDiscard{})
	assert.False(t, l.Enabled(context.Background(), liteError))
	l.Error("nothing", "k", "v") // must not panic
	assert.Same(t, l, l.With())
}

// chain is a LogValuer whose value is another chain, n deep, then "end".
type chain int

func (c chain) LogValue() liteValue {
	if c == 0 {
		return liteStringValue("end")
	}
	return liteAnyValue(c - 1)
}

// slogChain is chain for slog, to compare the two.
type slogChain int

func (c slogChain) LogValue() slog.Value {
	if c == 0 {
		return slog.StringValue("end")
	}
	return slog.AnyValue(c - 1)
}

// A LogValuer chain resolves as far as slog resolves one (100 LogValue
// calls); a longer one logs that LogValue was called too many times.
func TestLiteResolvesChainsAsSlog(t *testing.T) {
	for _, n := range []int{0, 1, 50, 98} {
		assert.Equal(t, slog.AnyValue(slogChain(n)).Resolve().String(), liteAnyValue(chain(n)).Resolve().String(), "chain of %d", n)
	}
	assert.Equal(t, "end", liteAnyValue(chain(98)).String())
	for _, n := range []int{99, 150} {
		assert.Contains(t, slog.AnyValue(slogChain(n)).Resolve().String(), "LogValue called too many times")
		assert.Equal(t, "LogValue called too many times", liteAnyValue(chain(n)).String(), "chain of %d", n)
	}
}

// A handler gets every attribute already resolved, from a log call and
// from With: the guest's handler prints what it gets, and a LogValuer's
// own fields (a secret's text) must never reach it.
func TestLiteHandlerGetsResolvedValues(t *testing.T) {
	var got []liteRecord
	l := liteNew(recorder{min: liteDebug, records: &got}).With("with", secret("sk-with"))
	l.Info("call", "token", secret("sk-token"), liteAttr{"attr", liteAnyValue(secret("sk-attr"))})
	require.Len(t, got, 1)
	n := 0
	got[0].Attrs(func(a liteAttr) bool {
		n++
		_, valuer := a.Value.any.(liteValuer)
		assert.False(t, valuer, "%s reached the handler unresolved", a.Key)
		assert.Equal(t, "[redacted]", a.Value.s, a.Key)
		return true
	})
	assert.Equal(t, 3, n)
}

// ctxHandler records whether Enabled got a context.
type ctxHandler struct {
	liteDiscard
	nilCtx *bool
}

func (h ctxHandler) Enabled(ctx context.Context, _ liteLevel) bool {
	*h.nilCtx = *h.nilCtx || ctx == nil
	return false
}

// Enabled with a nil context hands the handler a background context, as
// slog does: handlers need not check for nil.
func TestLiteEnabledNeverPassesANilContext(t *testing.T) {
	var sawNil bool
	l := liteNew(ctxHandler{nilCtx: &sawNil})
	l.Enabled(nil, liteInfo) //nolint:staticcheck // a nil context is allowed, as in slog
	l.Info("x")
	l.Log(nil, liteWarn, "y") //nolint:staticcheck // a nil context is allowed, as in slog
	assert.False(t, sawNil)
}
