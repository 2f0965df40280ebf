// Package logs is the logger core and the packages linked into the wasm
// guest take: log/slog's Logger everywhere but the wasip1 guest and the
// Cloudflare Worker (js), where it is a small logger of the same shape.
//
// Why: importing log/slog links its default handler (slog's init installs
// one that writes through package log), so slog's text and JSON
// formatting and package log are in every binary that imports it,
// whichever handler it uses: about 56 KB of the guest's gzip size
// (docs/RATIONALE.md, "A lean guest"). The guest hands each record to its
// host as one line of text and needs none of it.
//
// So on wasip1 and js Logger, Handler, Record, Attr, Value and Level are
// this package's own (lite.go, lite_lean.go), and everywhere else they are
// aliases of log/slog's (slog.go): native hosts keep passing a
// *slog.Logger as core.Host.Log, unchanged. The Worker writes slog's lines
// without it: NewTextHandler writes slog.TextHandler's and NewLogHandler
// those of slog's default logger (text.go; text_test.go holds each line
// to slog's own), about 43 KB of the Worker's gzip size. Package host,
// which takes *slog.Logger, does not build on js. Code that must build
// for both uses only what both have: the Logger methods Debug, Info,
// Warn, Error, Log, With, Enabled and Handler; New, Discard, String, StringValue, GroupValue;
// Record's Level, Message and Attrs; Attr's Key and Value; Value's String
// and Resolve; LogValuer. The lite Logger keeps slog's rules for key-value
// arguments ("!BADKEY" for a value without a key) and resolves LogValuers
// before a handler sees them, so a secret's redaction holds in the guest.
//
// No package linked into the guest or the Worker may import log/slog; the
// lite logger imports only context, fmt and strconv, its text handler
// (unused by the guest, so not linked there) time, io, reflect, sync and
// unicode besides.
package logs
