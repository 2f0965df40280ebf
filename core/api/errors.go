package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/revenantrt/revenant/core"
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
	ErrUnavailable      ErrorType = "unavailable"
	ErrReadOnly         ErrorType = "read_only"
	ErrInternal         ErrorType = "internal"
)

// Statuses maps every error type to its HTTP status.
var Statuses = map[ErrorType]int{
	ErrInvalidJSON:      http.StatusBadRequest,
	ErrInvalidRequest:   http.StatusBadRequest,
	ErrUnauthorized:     http.StatusUnauthorized,
	ErrForbiddenHost:    http.StatusForbidden,
	ErrForbiddenOrigin:  http.StatusForbidden,
	ErrNotFound:         http.StatusNotFound,
	ErrMethodNotAllowed: http.StatusMethodNotAllowed,
	ErrConflict:         http.StatusConflict,
	ErrPayloadTooLarge:  http.StatusRequestEntityTooLarge,
	ErrUnavailable:      http.StatusServiceUnavailable,
	ErrReadOnly:         http.StatusServiceUnavailable,
	ErrInternal:         http.StatusInternalServerError,
}

// apiError is an error with the response it deserves.
type apiError struct {
	typ ErrorType
	msg string
}

func (e *apiError) Error() string { return string(e.typ) + ": " + e.msg }

func fail(typ ErrorType, msg string) error { return &apiError{typ: typ, msg: msg} }

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error struct {
		Type    ErrorType `json:"type"`
		Message string    `json:"message"`
	} `json:"error"`
}

// classify turns any error into the response for it. Core's sentinels map
// to client errors; anything unknown is internal and its detail is logged,
// not sent.
func (h *Handler) classify(err error) (ErrorType, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.typ, ae.msg
	case errors.Is(err, core.ErrNotFound), errors.Is(err, ErrTreeNotFound):
		return ErrNotFound, "no such session"
	case errors.Is(err, core.ErrConflict), errors.Is(err, ErrTreeExists):
		return ErrConflict, cleanMessage(err)
	case errors.Is(err, core.ErrInvalid):
		return ErrInvalidRequest, cleanMessage(err)
	case errors.Is(err, core.ErrReadOnly):
		// Before ErrClosed: a read-only tree's refusal is not a restart.
		return ErrReadOnly, "the session is read-only: its storage is full or failing, so it cannot save anything; reading it still works"
	case errors.Is(err, core.ErrFenced), errors.Is(err, core.ErrClosed), errors.Is(err, storage.ErrClosed):
		return ErrUnavailable, "the session's host is restarting; try again"
	case errors.Is(err, core.ErrStorageUnavailable), storage.IsTransient(err):
		return ErrUnavailable, "the session's storage is temporarily unavailable (full, busy or failing); try again"
	}
	h.log.Error("request failed", "err", err)
	return ErrInternal, "internal error"
}

// cleanMessage is the client-facing part of a core error: the innermost
// error of the chain that is not the bare sentinel, without the sentinel's
// suffix and without the outer "verb object:" prefixes.
func cleanMessage(err error) string {
	msg := err.Error()
	for u := err; u != nil; u = errors.Unwrap(u) {
		if u == core.ErrInvalid || u == core.ErrConflict || u == core.ErrNotFound {
			break
		}
		msg = u.Error()
	}
	for _, sentinel := range []error{core.ErrInvalid, core.ErrConflict, core.ErrNotFound} {
		msg = strings.TrimSuffix(msg, ": "+sentinel.Error())
	}
	return msg
}

// StatusOf is the status a decoder or validation error is answered with;
// errors the API did not classify are 500.
func StatusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return Statuses[ae.typ]
	}
	return http.StatusInternalServerError
}

func (h *Handler) writeError(w http.ResponseWriter, err error) {
	typ, msg := h.classify(err)
	if typ == ErrUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	var body ErrorBody
	body.Error.Type, body.Error.Message = typ, msg
	writeJSON(w, Statuses[typ], body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
