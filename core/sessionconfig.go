package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// SessionConfig is the per-session configuration given at create time and
// stored with session.created. Empty fields take the host's defaults.
type SessionConfig struct {
	// SystemPrompt replaces the default system prompt.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Model names the provider model to request.
	Model string `json:"model,omitempty"`
	// Tools restricts the tools offered to the model to these names; nil
	// offers every configured tool, an empty list none.
	Tools *[]string `json:"tools,omitempty"`
}

// ParseSessionConfig decodes a stored or submitted configuration strictly:
// unknown fields and trailing data are errors (wrapping ErrInvalid).
func ParseSessionConfig(raw json.RawMessage) (SessionConfig, error) {
	var c SessionConfig
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			want := "a string"
			if typeErr.Field == "tools" || strings.HasPrefix(typeErr.Field, "tools.") {
				want = "an array of tool names"
			}
			if typeErr.Field == "" {
				return c, invalid("config must be a JSON object")
			}
			return c, invalid("config field %q must be %s", typeErr.Field, want)
		}
		return c, invalid("config: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return c, invalid("session config: trailing data")
	}
	return c, nil
}
