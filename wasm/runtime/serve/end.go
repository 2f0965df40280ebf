package serve

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/wasm/abi"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// transportError is a model request that failed below HTTP: it could not
// be sent, or its connection broke.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// redactedError is an error whose text had the provider key removed; it
// keeps the original in its chain so the end's code can still be told.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact removes the provider key from err's text.
func (t *Tree) redact(err error) error {
	key := t.cfg.Model.APIKey
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), key, "[redacted]"), err: err}
}

// endOf is the end of an egress of kind that ended with err (nil: cleanly),
// coded by what the error is, never by its text (docs/abi.md §4, egress
// ends). A tool's own error is EndError, its message the tool's output.
func endOf(kind abi.EgressKind, err error) runtime.EgressEnd {
	if err == nil {
		return runtime.EgressEnd{}
	}
	end := runtime.EgressEnd{Code: abi.EndError, Message: err.Error()}
	var netErr net.Error
	var transport *transportError
	switch {
	case errors.Is(err, context.Canceled):
		end.Code = abi.EndCancelled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		end.Code = abi.EndTimeout
	case errors.Is(err, web.ErrDenied):
		end.Code = abi.EndDenied
	case errors.Is(err, web.ErrTooLarge):
		end.Code = abi.EndTooLarge
	case errors.As(err, &transport), netErr != nil, kind == abi.EgressModel:
		// A model request fails only in transport, or while its body
		// streams: anything else is an answer.
		end.Code = abi.EndNetwork
	}
	return end
}
