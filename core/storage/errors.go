package storage

import (
	"context"
	"errors"
	"fmt"
)

// Code is an SQLite result code: primary (0–255) or extended (primary |
// detail<<8). Hosts report failures with these numbers whatever their driver,
// so classification never depends on message text.
type Code int

// Primary result codes core cares about. See https://sqlite.org/rescode.html.
const (
	CodeError      Code = 1
	CodeInternal   Code = 2
	CodePerm       Code = 3
	CodeAbort      Code = 4
	CodeBusy       Code = 5
	CodeLocked     Code = 6
	CodeNoMem      Code = 7
	CodeReadOnly   Code = 8
	CodeInterrupt  Code = 9
	CodeIOErr      Code = 10
	CodeCorrupt    Code = 11
	CodeFull       Code = 13
	CodeCantOpen   Code = 14
	CodeTooBig     Code = 18
	CodeConstraint Code = 19
)

// Primary returns the primary code of a possibly extended code.
func (c Code) Primary() Code { return c & 0xff }

// Error is a storage failure carrying its SQLite code. errors.Is matches an
// *Error against a Code by primary code, or by the exact extended code when
// the target is extended.
type Error struct {
	Code Code
	Msg  string
	Err  error // the host's own error, if any
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("sqlite error %d: %s", e.Code, e.Msg)
	}
	return fmt.Sprintf("sqlite error %d", e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, storage.CodeBusy) work.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	if !ok {
		return false
	}
	if c > 0xff {
		return e.Code == c
	}
	return e.Code.Primary() == c
}

// Error makes a Code usable as an errors.Is target.
func (c Code) Error() string { return fmt.Sprintf("sqlite code %d", int(c)) }

// CodeOf returns the SQLite code of the first *Error in err's tree, or 0.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// ErrClosed is returned by a DB whose handle was closed. Callers treat it
// like a stopped instance: find the tree's current instance and try again.
var ErrClosed = errors.New("database is closed")

// ErrNewerSchema is returned by migration when the database was written by a
// newer schema than this build knows. Nothing is written in that case.
var ErrNewerSchema = errors.New("database schema is newer than this build")

// IsTransient reports whether err is a storage failure that may succeed when
// the whole transaction is run again: FULL, BUSY, LOCKED or IOERR (with any
// extended code). Every leaf of a wrapped or joined error must be transient;
// a cancellation never is.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return allLeaves(err, func(leaf error) bool {
		var e *Error
		if !errors.As(leaf, &e) {
			return false
		}
		switch e.Code.Primary() {
		case CodeFull, CodeBusy, CodeLocked, CodeIOErr:
			return true
		}
		return false
	})
}

// allLeaves applies ok to every branch of a joined error tree; a branch that
// is an *Error stops the walk there (its Unwrap is the host's detail).
func allLeaves(err error, ok func(error) bool) bool {
	var e *Error
	if errors.As(err, &e) && !isJoin(err) {
		return ok(err)
	}
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		for _, c := range x.Unwrap() {
			if !allLeaves(c, ok) {
				return false
			}
		}
		return len(x.Unwrap()) > 0
	case interface{ Unwrap() error }:
		if inner := x.Unwrap(); inner != nil {
			return allLeaves(inner, ok)
		}
	}
	return ok(err)
}

func isJoin(err error) bool {
	for err != nil {
		if _, ok := err.(interface{ Unwrap() []error }); ok {
			return true
		}
		if _, ok := err.(*Error); ok {
			return false
		}
		err = errors.Unwrap(err)
	}
	return false
}
