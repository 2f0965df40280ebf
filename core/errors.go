package core

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrFenced: the write belongs to an execution whose claim moved on, or
	// to an instance whose epoch is no longer current. The writer must stop.
	ErrFenced = errors.New("fenced: execution or instance superseded")
	// ErrNotFound: no such session (or prompt).
	ErrNotFound = errors.New("not found")
	// ErrConflict: an idempotency key was reused with a different body.
	ErrConflict = errors.New("conflict")
	// ErrQueueFull: the session holds as many prompts not ended (queued or
	// running) as it may (Config.WithQueueCap); nothing was admitted.
	ErrQueueFull = errors.New("queue full")
	// ErrInvalid: the request is malformed (empty text, unknown mode, …).
	ErrInvalid = errors.New("invalid request")
	// ErrClosed: the instance was closed.
	ErrClosed = errors.New("instance closed")
	// ErrStorageUnavailable: storage kept failing with transient errors
	// (full, busy, I/O) for the whole write window; nothing of the write was
	// stored. The caller may try again later.
	ErrStorageUnavailable = errors.New("storage unavailable")
	// ErrReadOnly: the tree's storage would not take a write for longer than
	// the settlement window (a quota that did not come back), or refused the
	// boot's epoch, so the instance serves reads only. Each write is still
	// tried once; the first that succeeds makes the tree writable again.
	ErrReadOnly = errors.New("tree is read-only: its storage is full or failing")
)

// Error is a refusal core explains to the client: Code is the sentinel it
// matches with errors.Is (ErrInvalid, ErrConflict), Msg what was wrong, in
// words the API sends as they are. Error() reads as the wrapped sentinel
// used to ("admit prompt: empty text: invalid request"), so logs are
// unchanged.
type Error struct {
	Code error
	Msg  string
}

func (e *Error) Error() string { return e.Msg + ": " + e.Code.Error() }

// Unwrap makes errors.Is(err, e.Code) true.
func (e *Error) Unwrap() error { return e.Code }

// invalid is the caller's mistake, explained by msg.
func invalid(format string, args ...any) error {
	return &Error{Code: ErrInvalid, Msg: fmt.Sprintf(format, args...)}
}

// EchoLimit is how many bytes of a value the client sent an error message
// repeats back (Clip).
const EchoLimit = 64

// Clip is a value from the request as an error message repeats it: whole up
// to EchoLimit bytes, else its first EchoLimit bytes (cut at a character
// boundary) and "…". A 60 KB id in a path is named, not sent back whole.
func Clip(s string) string { return ClipTo(s, EchoLimit) }

// ClipTo is s whole up to n bytes, else its first n bytes or fewer (cut at
// a character boundary) and "…".
func ClipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
