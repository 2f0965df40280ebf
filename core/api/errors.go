package api

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/storage"
)

// ErrorType is the "type" of an error response. Each has one status code.
type ErrorType string

// Error types. docs/api.md lists the same table; a test keeps them equal.
const (
	ErrInvalidJSON      ErrorType = "invalid_json"
	ErrInvalidRequest   ErrorType = "invalid_request"
	ErrUnauthorized     ErrorType = "unauthorized"
	ErrForbiddenHost    ErrorType = "forbidden_host"
	ErrForbiddenOrigin  ErrorType = "forbidden_origin"
	ErrNotFound         ErrorType = "not_found"
	ErrMethodNotAllowed ErrorType = "method_not_allowed"
	ErrConflict         ErrorType = "conflict"
	ErrPayloadTooLarge  ErrorType = "payload_too_large"
	ErrQueueFull        ErrorType = "queue_full"
	ErrUnavailable      ErrorType = "unavailable"
	ErrReadOnly         ErrorType = "read_only"
	ErrInternal         ErrorType = "internal"
)

// Statuses maps every error type to its HTTP status.
var Statuses = map[ErrorType]int{
	ErrInvalidJSON:      httpmsg.StatusBadRequest,
	ErrInvalidRequest:   httpmsg.StatusBadRequest,
	ErrUnauthorized:     httpmsg.StatusUnauthorized,
	ErrForbiddenHost:    httpmsg.StatusForbidden,
	ErrForbiddenOrigin:  httpmsg.StatusForbidden,
	ErrNotFound:         httpmsg.StatusNotFound,
	ErrMethodNotAllowed: httpmsg.StatusMethodNotAllowed,
	ErrConflict:         httpmsg.StatusConflict,
	ErrPayloadTooLarge:  httpmsg.StatusRequestEntityTooLarge,
	ErrQueueFull:        httpmsg.StatusTooManyRequests,
	ErrUnavailable:      httpmsg.StatusServiceUnavailable,
	ErrReadOnly:         httpmsg.StatusServiceUnavailable,
	ErrInternal:         httpmsg.StatusInternalServerError,
}

// Error is an API error: its type (which has one status) and the message
// the client reads. Handlers return it, and WriteError answers it as it is.
// errors.Is(err, t) holds for an *Error of type t.
type Error struct {
	Type    ErrorType
	Message string
	// RetryAfter, when positive, is sent as a Retry-After header (whole
	// seconds, rounded up): how long the client should wait before it
	// tries again. It is set on a refusal expected to clear: a session at
	// its queue cap (QueueFullRetryAfter), a local server at its cap of
	// open trees.
	RetryAfter time.Duration
}

// QueueFullRetryAfter is the Retry-After of a 429 queue_full. Room comes
// when a turn ends, which no one can foretell; five seconds keeps a client
// that honours the header from hammering a full queue without making it
// wait long once a short turn has ended.
const QueueFullRetryAfter = 5 * time.Second

func (e *Error) Error() string { return string(e.Type) + ": " + e.Message }

// Is matches the error's type, so an ErrorType serves as its sentinel.
func (e *Error) Is(target error) bool {
	t, ok := target.(ErrorType)
	return ok && t == e.Type
}

// Error makes an ErrorType a sentinel error (see Error.Is).
func (t ErrorType) Error() string { return string(t) }

func fail(typ ErrorType, msg string) error { return &Error{Type: typ, Message: msg} }

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error struct {
		Type    ErrorType `json:"type"`
		Message string    `json:"message"`
	} `json:"error"`
}

// ErrorOf is the API error err is answered with, chosen by code: an
// *Error or a *DecodeError as it is, core's and Trees' sentinels by
// errors.Is, with the message core gave for the client (core.Error).
// Anything else is internal, and its text is not sent: see Internal.
func ErrorOf(err error) *Error {
	var ae *Error
	var de *DecodeError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &de):
		return &Error{Type: de.Type(), Message: de.msg}
	case errors.Is(err, core.ErrNotFound), errors.Is(err, ErrTreeNotFound):
		var ce *core.Error
		if errors.As(err, &ce) { // a blocker, not the session, was not found
			return &Error{Type: ErrNotFound, Message: ce.Msg}
		}
		return &Error{Type: ErrNotFound, Message: "no such session"}
	case errors.Is(err, core.ErrConflict), errors.Is(err, ErrTreeExists):
		return &Error{Type: ErrConflict, Message: clientMessage(err)}
	case errors.Is(err, core.ErrInvalid):
		return &Error{Type: ErrInvalidRequest, Message: clientMessage(err)}
	case errors.Is(err, core.ErrQueueFull):
		return &Error{Type: ErrQueueFull, Message: clientMessage(err), RetryAfter: QueueFullRetryAfter}
	case errors.Is(err, core.ErrReadOnly):
		// Before ErrClosed: a read-only tree's refusal is not a restart.
		return &Error{Type: ErrReadOnly, Message: "the session is read-only: its storage is full or failing, so it cannot save anything; reading it still works"}
	case errors.Is(err, core.ErrFenced), errors.Is(err, core.ErrClosed), errors.Is(err, storage.ErrClosed):
		return &Error{Type: ErrUnavailable, Message: "the session's instance stopped (its host restarting, or the session being deleted); try again"}
	case storage.CodeOf(err).Primary() == storage.CodeTooBig:
		// A value over what the storage takes (a Durable Object's 2 MB):
		// the request's content, never worth a retry.
		return &Error{Type: ErrPayloadTooLarge, Message: "the request's content is too large to store"}
	case errors.Is(err, core.ErrStorageUnavailable), storage.IsTransient(err):
		return &Error{Type: ErrUnavailable, Message: "the session's storage is temporarily unavailable (full, busy or failing); try again"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The request's context ended first: its client went away (which
		// reads no answer), or the host is stopping. Routine, not the
		// server's fault, so not internal and not logged as an error.
		return &Error{Type: ErrUnavailable, Message: "the request ended before it was served (cancelled, or the server is stopping); try again"}
	}
	return &Error{Type: ErrInternal, Message: "internal error"}
}

// Internal reports whether err is answered as an internal error that the
// API did not raise itself: its detail is the server's to log, since the
// client reads only "internal error".
func Internal(err error) bool {
	var ae *Error
	return !errors.As(err, &ae) && ErrorOf(err).Type == ErrInternal
}

// clientMessage is what a client reads about a refusal: the message core
// wrote for it (core.Error), or the text of a sentinel that has no other
// (ErrTreeExists), or, from a host that wrapped a sentinel in text of its
// own, that text.
func clientMessage(err error) string {
	var ce *core.Error
	switch {
	case errors.As(err, &ce):
		return ce.Msg
	case errors.Is(err, ErrTreeExists):
		return ErrTreeExists.Error()
	}
	return err.Error()
}

// StatusOf is the HTTP status err is answered with (ErrorOf).
func StatusOf(err error) int { return Statuses[ErrorOf(err).Type] }

// WriteError answers err: the status of its type, WWW-Authenticate on a
// 401, Retry-After when the error names one (Error.RetryAfter), and the body {"error":{"type","message"}} (ErrorOf). It logs
// nothing; a caller with a log writes Internal errors there first.
func WriteError(w httpmsg.ResponseWriter, err error) {
	e := ErrorOf(err)
	if e.Type == ErrUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	var body ErrorBody
	body.Error.Type, body.Error.Message = e.Type, core.ClipTo(e.Message, maxMessage)
	writeJSON(w, Statuses[e.Type], body)
}

// maxMessage bounds an error message sent: values from the request are
// clipped where they are quoted (core.Clip); this catches one quoted whole
// by a message not written here (a JSON decoder's, a rule validator's).
const maxMessage = 1024

// writeError is WriteError with the detail of an internal error logged.
func writeError(log *logs.Logger, w httpmsg.ResponseWriter, err error) {
	if Internal(err) {
		log.Error("request failed", "err", err)
	}
	WriteError(w, err)
}

// writeJSON writes every JSON answer, errors included. nosniff keeps a
// browser from reading one as anything but JSON, whatever text of the
// request it quotes; no-store keeps every cache from keeping a copy of a
// principal's transcript, ids or blockers (a browser's disk cache keeps
// what it is not told otherwise, after the page that asked is gone).
func writeJSON(w httpmsg.ResponseWriter, status int, v any) {
	// What json.NewEncoder(w).Encode(v) writes, without the Encoder: its
	// indenting cost the guest 2 KB gzip. Marshalled before the head: a
	// value that does not marshal (a stored JSON text gone bad in a
	// json.RawMessage) is an internal error, not the status it was meant
	// for with no body.
	b, err := json.Marshal(v)
	if err != nil {
		status, b = Statuses[ErrInternal], []byte(`{"error":{"type":"internal","message":"internal error"}}`)
		// The headers set for the answer meant (a Location, an Allow) do
		// not belong on the 500; who may read an answer (CORS) still holds.
		for k := range w.Header() {
			if !strings.HasPrefix(k, "Access-Control-") && k != "Vary" {
				delete(w.Header(), k)
			}
		}
		// The client reads only "internal error": the route's log says
		// what (handle), or stored JSON gone bad would go unseen.
		if hw, ok := w.(*headWriter); ok {
			hw.unmarshalled = err
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
