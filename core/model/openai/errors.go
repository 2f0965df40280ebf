package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/model"
)

const (
	// maxMsg caps the provider text carried by an error.
	maxMsg = 500
	// maxErrorBody caps how much of an error response is read.
	maxErrorBody = 64 << 10
)

// retryableStatus reports whether an HTTP status says "try again later".
func retryableStatus(code int) bool {
	return code == httpmsg.StatusRequestTimeout || code == httpmsg.StatusTooManyRequests || (code >= 500 && code <= 599)
}

// statusError turns a non-2xx response into a *model.Error carrying the
// provider's message and, when retryable, its Retry-After hint.
func (m *Model) statusError(resp *httpmsg.Response) *model.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &model.Error{Status: resp.StatusCode, Retryable: retryableStatus(resp.StatusCode)}
	if e.Retryable {
		e.RetryAfter = retryAfter(resp.Header, m.maxRetryAfter)
	}
	msg := providerMessage(body)
	if msg == "" {
		msg = httpmsg.StatusText(resp.StatusCode)
	}
	if msg == "" {
		msg = "HTTP " + strconv.Itoa(resp.StatusCode)
	}
	e.Msg = truncate(m.redact(msg))
	return e
}

// retryAfter reads how long the provider asked to wait: OpenAI's
// retry-after-ms, else a delta-seconds Retry-After, capped at limit. An
// HTTP-date Retry-After, or anything unparsable, is no hint (0): reading a
// date would need the current time.
func retryAfter(h httpmsg.Header, limit time.Duration) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return capped(ms*float64(time.Millisecond), limit)
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseUint(v, 10, 64); err == nil {
			return capped(float64(s)*float64(time.Second), limit)
		} else if errors.Is(err, strconv.ErrRange) {
			return limit // all digits, too many of them
		}
	}
	return 0
}

// capped is a wait of nanos nanoseconds, rounded up (a wait the provider
// asked for is never shortened), at most limit. The arithmetic is in
// nanoseconds, where whole milliseconds and seconds are exact: seconds as
// a float would turn 8008 ms into 8007.999999 ms.
func capped(nanos float64, limit time.Duration) time.Duration {
	if nanos >= float64(limit) {
		return limit
	}
	return time.Duration(math.Ceil(nanos))
}

// errorBody is the error shapes seen from OpenAI-compatible servers:
// {"error": {"message", "code", "type"}} (OpenAI, OpenRouter, Ollama),
// {"error": "text"}, {"message": ...} (vLLM), {"detail": ...} (FastAPI
// servers) and {"errors": [{"message"}]} (Cloudflare).
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail"`
	Errors  []errorObject   `json:"errors"`
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"` // a number or a string
}

// parseError decodes the "error" member of a body or stream event; ok is
// false when there is none.
func parseError(raw json.RawMessage) (obj errorObject, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return obj, false
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return errorObject{Message: s}, true
	}
	if json.Unmarshal(raw, &obj) != nil {
		return errorObject{Message: string(raw)}, true
	}
	return obj, true
}

// providerMessage extracts the message from an error response body, or
// returns the body itself when it is short text, or "".
func providerMessage(body []byte) string {
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		if obj, ok := parseError(eb.Error); ok && obj.Message != "" {
			return obj.Message
		}
		if eb.Message != "" {
			return eb.Message
		}
		if len(eb.Errors) > 0 && eb.Errors[0].Message != "" {
			return eb.Errors[0].Message
		}
		if d := bytes.TrimSpace(eb.Detail); len(d) > 0 && string(d) != "null" {
			var s string
			if json.Unmarshal(d, &s) == nil {
				return s
			}
			return string(d)
		}
	}
	text := strings.TrimSpace(string(body))
	if text == "" || !utf8.ValidString(text) || strings.HasPrefix(text, "<") {
		return "" // nothing, binary, or an HTML error page
	}
	return text
}

// streamError turns an error reported inside the stream into a
// *model.Error. It is retryable only when its code (or type) says
// overloaded, rate limited or a server failure.
func streamError(obj errorObject, redact func(string) string) *model.Error {
	e := &model.Error{Msg: obj.Message}
	code := strings.Trim(string(bytes.TrimSpace(obj.Code)), `"`)
	if n, err := strconv.Atoi(code); err == nil {
		if n >= 100 && n <= 599 {
			e.Status = n
		}
		e.Retryable = retryableStatus(n)
	}
	switch code {
	case "rate_limit_exceeded", "server_error", "overloaded", "overloaded_error":
		e.Retryable = true
	}
	switch obj.Type {
	case "server_error", "overloaded_error", "rate_limit_error":
		e.Retryable = true
	}
	if e.Msg == "" {
		e.Msg = "the provider reported an error in the stream"
		if code != "" {
			e.Msg += " (code " + code + ")"
		}
	}
	e.Msg = truncate(redact(e.Msg))
	return e
}

// truncate cuts s to about maxMsg bytes on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxMsg {
		return s
	}
	cut := maxMsg
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// transportError is a retryable *model.Error for a failed exchange: msg
// (redacted) says what failed, and the cause stays reachable by errors.Is
// (a fenced egress is core.ErrFenced), its own text redacted too.
func transportError(msg string, err error, redact func(string) string) *model.Error {
	return &model.Error{Retryable: true, Msg: redact(msg + ": " + err.Error()), Err: redactedError{err, redact}}
}

// sendError is transportError for a request that got no answer. Its
// message reaches the session's events, and so every reader of the
// session: it does not quote the transport's text, which names the
// provider's URL (an internal host, a user name) and address. The cause,
// redacted, stays in Err, which the runner logs for the operator.
func sendError(err error, redact func(string) string) *model.Error {
	return &model.Error{Retryable: true, Msg: "send request: the provider could not be reached", Err: redactedError{err, redact}}
}

// redactedError is a cause whose text is redacted, should anything print it.
type redactedError struct {
	err    error
	redact func(string) string
}

func (e redactedError) Error() string { return e.redact(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }
