package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/revenantrt/revenant/core/permission"
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
	// Permissions are the session's own permission rules (package
	// core/permission), applied after the server's configured rules: they
	// may allow what those ask about, or ask about or deny what they allow,
	// but never lift a configured deny. At most permission.MaxRules.
	Permissions []permission.Rule `json:"permissions,omitempty"`
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
			switch {
			case typeErr.Field == "tools" || strings.HasPrefix(typeErr.Field, "tools."):
				want = "an array of tool names"
			case typeErr.Field == "permissions":
				want = `an array of rules {"action", "resource", "decision"}`
			case typeErr.Field == "permissions.exact" || typeErr.Field == "permissions.final":
				want = "true or false"
			}
			if typeErr.Field == "" {
				return c, invalid("config must be a JSON object")
			}
			field := typeErr.Field
			if name, ok := strings.CutPrefix(field, "permissions."); ok {
				// The decoder names a rule's field without saying which
				// rule; the other rule errors do ("permissions[1].action").
				if i := firstMistypedRule(raw); i >= 0 {
					field = fmt.Sprintf("permissions[%d].%s", i, name)
				}
			}
			return c, invalid("config field %q must be %s", Clip(field), want)
		}
		return c, invalid("config: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return c, invalid("session config: trailing data")
	}
	if err := permission.ValidateRules(c.Permissions); err != nil {
		return c, invalid("config field \"permissions%s", quoteField(err))
	}
	for i, r := range c.Permissions {
		if r.Final {
			return c, invalid("config field \"permissions[%d].final\": only the server's rules can be final", i)
		}
	}
	return c, nil
}

// firstMistypedRule returns the index of the first permission rule in raw
// that does not decode as a rule, or -1 if it cannot tell.
func firstMistypedRule(raw json.RawMessage) int {
	var list struct {
		Permissions []json.RawMessage `json:"permissions"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return -1
	}
	for i, r := range list.Permissions {
		var rule permission.Rule
		if json.Unmarshal(r, &rule) != nil {
			return i
		}
	}
	return -1
}

// quoteField turns ValidateRules' `[1].decision: must be …` into
// `[1].decision": must be …`, closing the quoted field name.
func quoteField(err error) string {
	msg := err.Error()
	if !strings.HasPrefix(msg, "[") {
		return "\": " + msg // a problem with the whole list
	}
	field, rest, _ := strings.Cut(msg, ": ")
	return field + "\": " + rest
}
