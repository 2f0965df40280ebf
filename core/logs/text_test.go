package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slogSecret is secret for slog: it redacts itself.
type slogSecret string

func (slogSecret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// slogConfig is config for slog: a group holding a secret.
type slogConfig config

func (c slogConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", c.url), slog.Any("key", slogSecret(c.key)))
}

// badText is a TextMarshaler that fails.
type badText struct{}

func (badText) MarshalText() ([]byte, error) { return nil, errors.New("no text") }

// nilText panics on a nil receiver, as a careless MarshalText does.
type nilText struct{ s string }

func (t *nilText) MarshalText() ([]byte, error) { return []byte(t.s), nil }

// panicText panics whatever its receiver.
type panicText struct{}

func (panicText) MarshalText() ([]byte, error) { panic("boom") }

type pair struct {
	A int
	B string
}

// toSlog is a lite log call's argument as slog's.
func toSlog(x any) any {
	switch v := x.(type) {
	case liteAttr:
		return slog.Attr{Key: v.Key, Value: toSlogValue(v.Value)}
	case secret:
		return slogSecret(v)
	case config:
		return slogConfig(v)
	}
	return x
}

func toSlogValue(v liteValue) slog.Value {
	switch {
	case v.group != nil:
		as := make([]slog.Attr, len(v.group))
		for i, a := range v.group {
			as[i] = toSlog(a).(slog.Attr)
		}
		return slog.GroupValue(as...)
	case v.any != nil:
		return slog.AnyValue(toSlog(v.any))
	}
	return slog.StringValue(v.s)
}

func toSlogArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = toSlog(a)
	}
	return out
}

// textCalls are log calls whose lines the lite text handler must write as
// slog's text handler and default logger do: every kind of value slog
// tells apart, strings that need quoting and strings that do not.
var textCalls = []struct {
	level liteLevel
	msg   string
	args  []any
}{
	{liteInfo, "plain", nil},
	{liteDebug, "dropped", []any{"k", 1}},
	{liteInfo - 1, "dropped too", []any{"k", 1}},
	{liteWarn, "tree booted", []any{"tree", "t1", "resumed", 1}},
	{liteError, "odd", []any{"k", "v", "trailing"}},
	{liteWarn + 2, "", []any{42}},
	{liteInfo, "msg=with \"quotes\"", []any{"empty", "", "space", "a b", "eq", "a=b", "quote", `a"b`, "backslash", `a\b`,
		"tab", "a\tb", "nl", "a\nb", "del", "a\x7fb", "unicode", "héllo→", "nbsp", "a\u00a0b", "bad", "a\xffb", "zw", "a\u200bb"}},
	{liteInfo, "keys", []any{"a key", 1, "k=v", 2, "", 3, "ü", 4}},
	{liteInfo, "ints", []any{"int", -1, "i8", int8(-8), "i16", int16(16), "i32", int32(-32), "i64", int64(math.MinInt64),
		"uint", uint(1), "u8", uint8(8), "u16", uint16(16), "u32", uint32(32), "u64", uint64(math.MaxUint64), "uptr", uintptr(7)}},
	{liteInfo, "floats", []any{"f32", float32(0.1), "f64", 0.1, "big", 1e21, "small", 1e-7, "nan", math.NaN(), "inf", math.Inf(-1), "neg0", math.Copysign(0, -1)}},
	{liteInfo, "others", []any{"t", true, "f", false, "d", 1500 * time.Millisecond, "zero", time.Duration(0),
		"time", time.Date(2026, 12, 6, 2, 3, 4, 5_678_900, time.UTC),
		"zone", time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -(3*3600+30*60))),
		"err", errors.New("boom: a b"), "nilerr", error(nil), "nil", nil}},
	{liteInfo, "any", []any{"bytes", []byte("a b\x00"), "plainbytes", []byte("ab"), "raw", json.RawMessage(`{"a":1}`), "addr", netip.MustParseAddr("::1"),
		"badtext", badText{}, "niltext", (*nilText)(nil), "text", &nilText{"x y"}, "panictext", panicText{},
		"struct", pair{1, "x y"}, "ptr", &pair{2, "z"}, "slice", []int{1, 2}, "map", map[string]int{"a": 1}}},
	{liteInfo, "attrs", []any{liteString("s", "v"), liteAttr{"n", liteAnyValue(3)}, liteString("", "")}},
	{liteInfo, "groups", []any{
		liteAttr{"g", liteGroupValue(liteString("a", "x"), liteAttr{"h", liteGroupValue(liteString("b", "y z"))})},
		liteAttr{"", liteGroupValue(liteString("inline", "1"))},
		liteAttr{"q g", liteGroupValue(liteString("k", "v"))},
		liteAttr{"empty", liteGroupValue(liteString("", ""))},
		liteAttr{"gk", liteGroupValue(liteString("", "v"))},
	}},
	{liteInfo, "secrets", []any{"key", secret("sk-1"), "cfg", config{url: "https://api", key: "sk-2"}}},
}

// The text handler writes what slog.NewTextHandler(w, nil) writes for the
// same call at the same time.
func TestLiteTextWritesSlogTextLines(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 3, 4, 987_654_321, time.FixedZone("", 3600))
	for _, withArgs := range [][]any{nil, {"tree", "t1", "a key", secret("sk-w")}, {liteString("", "")}} {
		var lite, want bytes.Buffer
		ll := liteNew(newLiteText(&lite, func() time.Time { return at }, false)).With(withArgs...)
		sh := slog.New(slog.NewTextHandler(&want, nil)).With(toSlogArgs(withArgs)...).Handler()
		for _, c := range textCalls {
			ll.Log(context.Background(), c.level, c.msg, c.args...)
			if sh.Enabled(context.Background(), slog.Level(c.level)) {
				r := slog.NewRecord(at, slog.Level(c.level), c.msg, 0)
				r.Add(toSlogArgs(c.args)...)
				require.NoError(t, sh.Handle(context.Background(), r))
			}
		}
		require.NotEmpty(t, want.String())
		assert.Equal(t, strings.Split(want.String(), "\n"), strings.Split(lite.String(), "\n"), "With(%v)", withArgs)
		assert.NotContains(t, lite.String(), "sk-")
	}
}

// WithGroup prefixes the keys that follow, as slog's text handler does.
func TestLiteTextWithGroup(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 3, 4, 0, time.UTC)
	var lite, want bytes.Buffer
	lh := newLiteText(&lite, func() time.Time { return at }, false).WithGroup("g").WithAttrs([]liteAttr{liteString("a", "1")}).WithGroup("").WithGroup("h q")
	sh := slog.NewTextHandler(&want, nil).WithGroup("g").WithAttrs([]slog.Attr{slog.String("a", "1")}).WithGroup("").WithGroup("h q")
	for _, c := range textCalls[:8] {
		_ = liteNew(lh).h.Handle(context.Background(), liteRecord{Level: c.level, Message: c.msg, attrs: liteAttrs(c.args)})
		r := slog.NewRecord(at, slog.Level(c.level), c.msg, 0)
		r.Add(toSlogArgs(c.args)...)
		require.NoError(t, sh.Handle(context.Background(), r))
	}
	assert.Equal(t, strings.Split(want.String(), "\n"), strings.Split(lite.String(), "\n"))
}

// The log handler writes what slog's default logger writes through
// package log, date aside (package log reads the clock; the test drops
// its date with log.SetFlags(0), and checks the lite handler's separately).
func TestLiteLogWritesSlogDefaultLines(t *testing.T) {
	var lite, want bytes.Buffer
	flags, out := log.Flags(), log.Writer()
	t.Cleanup(func() { log.SetFlags(flags); log.SetOutput(out) })
	log.SetFlags(0)
	log.SetOutput(&want)
	ll := liteNew(newLiteText(&lite, nil, true)).With("tree", "t1")
	sl := slog.Default().With("tree", "t1")
	calls := append(textCalls, struct {
		level liteLevel
		msg   string
		args  []any
	}{liteError, "ends in a newline\n", nil})
	for _, c := range calls {
		ll.Log(context.Background(), c.level, c.msg, c.args...)
		sl.Log(context.Background(), slog.Level(c.level), c.msg, toSlogArgs(c.args)...)
	}
	// A message ending in a newline, with no attribute after it, gets no
	// second one.
	liteNew(newLiteText(&lite, nil, true)).Error("bare, ends in a newline\n")
	slog.Error("bare, ends in a newline\n")
	require.NotEmpty(t, want.String())
	assert.Equal(t, strings.Split(want.String(), "\n"), strings.Split(lite.String(), "\n"))

	lite.Reset()
	at := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	liteNew(newLiteText(&lite, func() time.Time { return at }, true)).Error("front: list", "err", errors.New("x"))
	assert.Equal(t, "2026/01/02 03:04:05 ERROR front: list err=x\n", lite.String()) // log.LstdFlags
}

// With on a logger made by With adds to its attributes, and two loggers
// made from one parent keep their own: as slog's text handler writes them.
func TestLiteTextWithAttrsChainedAndShared(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 3, 4, 0, time.UTC)
	var lite, want bytes.Buffer
	// Parents of several lengths: some leave room in their attributes'
	// buffer, where a child's append would land if it shared it.
	for n := 1; n <= 24; n++ {
		v := strings.Repeat("v", n)
		lp := liteNew(newLiteText(&lite, func() time.Time { return at }, false)).With("tree", v)
		sp := slog.New(slog.NewTextHandler(&want, nil)).With("tree", v)
		la, lb := lp.With("a", "1"), lp.With("b", "2")
		sa, sb := sp.With("a", "1"), sp.With("b", "2")
		for _, l := range []*liteLogger{la, lb, la.With("c", "3"), lp} {
			l.Info("x")
		}
		for _, l := range []*slog.Logger{sa, sb, sa.With("c", "3"), sp} {
			require.NoError(t, l.Handler().Handle(context.Background(), slog.NewRecord(at, slog.LevelInfo, "x", 0)))
		}
	}
	assert.Equal(t, strings.Split(want.String(), "\n"), strings.Split(lite.String(), "\n"))
}
