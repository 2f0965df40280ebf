package core

import "errors"

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrFenced: the write belongs to an execution whose claim moved on, or
	// to an instance whose epoch is no longer current. The writer must stop.
	ErrFenced = errors.New("fenced: execution or instance superseded")
	// ErrNotFound: no such session (or prompt).
	ErrNotFound = errors.New("not found")
	// ErrConflict: an idempotency key was reused with a different body.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request is malformed (empty text, unknown mode, …).
	ErrInvalid = errors.New("invalid request")
	// ErrClosed: the instance was closed.
	ErrClosed = errors.New("instance closed")
)
