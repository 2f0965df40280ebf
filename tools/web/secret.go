package web

import (
	"fmt"
	"io"

	"github.com/revenantrt/revenant/core/logs"
)

// Secret is a credential, such as a webhook's signing key, that never
// prints: fmt (every verb, also inside structs, slices and pointers),
// encoding/json and log/slog all show "[redacted]". Build one with
// NewSecret or by decoding a JSON string; Reveal returns the value where it
// is needed.
//
// The value sits behind a pointer, so even fmt's reflection-based fallback
// (used for a bad verb, where no Format or String method is consulted)
// shows an address, never the text.
type Secret struct{ v *string }

const redacted = "[redacted]"

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{&s} }

// Reveal returns the secret's value; "" for the zero Secret.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// Len is the value's length in bytes.
func (s Secret) Len() int { return len(s.Reveal()) }

// String implements fmt.Stringer.
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return redacted }

// Format implements fmt.Formatter for every verb.
func (Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// MarshalText implements encoding.TextMarshaler: JSON shows "[redacted]".
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// UnmarshalText implements encoding.TextUnmarshaler: a JSON string decodes
// into the value.
func (s *Secret) UnmarshalText(b []byte) error {
	*s = NewSecret(string(b))
	return nil
}

// LogValue implements logs.LogValuer.
func (Secret) LogValue() logs.Value { return logs.StringValue(redacted) }
