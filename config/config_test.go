package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/config"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// exampleConfig is docs/config.example.json, which the README shows; the
// test below keeps the two identical and the example valid.
const exampleConfig = `{
  "webhook_tools": [
    {
      "name": "create_ticket",
      "description": "Open a ticket in the team's tracker. Returns the new ticket's id and URL.",
      "parameters": {
        "type": "object",
        "properties": {
          "title": {"type": "string", "description": "One-line summary."},
          "body": {"type": "string", "description": "Details, in Markdown."},
          "priority": {"type": "string", "enum": ["low", "normal", "high"]}
        },
        "required": ["title"],
        "additionalProperties": false
      },
      "url": "https://tickets.example.com/hooks/revenant",
      "idempotent": true,
      "secret": "replace-me-with-a-long-random-string-1",
      "timeout": "10s",
      "permission": "allow"
    },
    {
      "name": "deploy_staging",
      "description": "Deploy a service to staging. Returns the deployment log.",
      "parameters": {
        "type": "object",
        "properties": {
          "service": {"type": "string"},
          "version": {"type": "string"}
        },
        "required": ["service", "version"],
        "additionalProperties": false
      },
      "url": "http://10.20.0.7:8080/deploy",
      "idempotent": false,
      "secret": "replace-me-with-a-long-random-string-2",
      "timeout": "2m",
      "permission": "ask"
    }
  ],
  "permissions": [
    {"action": "http_request", "resource": "*", "decision": "ask"},
    {"action": "http_request", "resource": "http:*.example.com", "decision": "allow"},
    {"action": "deploy_staging", "resource": "*", "decision": "ask", "final": true}
  ],
  "egress": {
    "schemes": ["https", "http"],
    "ports": [443, 80],
    "hosts": ["*.example.com", "api.github.com"],
    "max_response_bytes": 1048576,
    "timeout": "30s"
  },
  "allowed_models": ["gpt-4o-mini", "gpt-4o"],
  "session_defaults": {
    "system_prompt": "You are a careful operations assistant. Ask before changing anything.",
    "model": "gpt-4o-mini",
    "tools": ["http_request", "kv_get", "kv_put", "question", "create_ticket", "deploy_staging"]
  },
  "settings": {
    "resume_budget": 5,
    "step_cap": 50,
    "stream_idle": "90s",
    "max_claim_age": "24h",
    "session_page_size": 100
  }
}
`

const examplePath = "../docs/config.example.json"

func TestExample(t *testing.T) {
	file, err := os.ReadFile(examplePath)
	require.NoError(t, err)
	require.Equal(t, exampleConfig, string(file), "docs/config.example.json and the fixture must match")

	c, err := config.Load(examplePath)
	require.NoError(t, err)
	fromString, err := config.Parse([]byte(exampleConfig))
	require.NoError(t, err)
	require.Equal(t, fromString, c)

	require.Len(t, c.WebhookTools, 2)
	ticket, deploy := c.WebhookTools[0], c.WebhookTools[1]
	require.Equal(t, "create_ticket", ticket.Name)
	require.True(t, ticket.Idempotent)
	require.Equal(t, "replace-me-with-a-long-random-string-1", ticket.Secret.Reveal())
	require.Equal(t, 10*time.Second, ticket.Timeout)
	require.Equal(t, "allow", ticket.Permission)
	require.Equal(t, "https://tickets.example.com/hooks/revenant", ticket.URL)
	require.JSONEq(t, `{"type":"object","properties":{"title":{"type":"string","description":"One-line summary."},"body":{"type":"string","description":"Details, in Markdown."},"priority":{"type":"string","enum":["low","normal","high"]}},"required":["title"],"additionalProperties":false}`, string(ticket.Parameters))
	require.Equal(t, "deploy_staging", deploy.Name)
	require.False(t, deploy.Idempotent)
	require.Equal(t, 2*time.Minute, deploy.Timeout)
	require.Equal(t, "ask", deploy.Permission)

	require.Equal(t, []config.Rule{
		{Action: "http_request", Resource: "*", Decision: config.Ask},
		{Action: "http_request", Resource: "http:*.example.com", Decision: config.Allow},
		{Action: "deploy_staging", Resource: "*", Decision: config.Ask, Final: true},
	}, c.Permissions)
	require.Equal(t, []string{"gpt-4o-mini", "gpt-4o"}, c.AllowedModels)

	p := c.EgressPolicy()
	require.Equal(t, []string{"https", "http"}, p.Schemes())
	require.Equal(t, []int{443, 80}, p.Ports())
	require.Equal(t, []string{"*.example.com", "api.github.com"}, p.Hosts())
	require.Empty(t, p.AllowCIDRs())
	require.Equal(t, int64(1<<20), p.MaxResponseBytes())
	require.Equal(t, 30*time.Second, p.Timeout())

	require.Equal(t, "You are a careful operations assistant. Ask before changing anything.", c.SessionDefaults.SystemPrompt)
	require.Equal(t, "gpt-4o-mini", c.SessionDefaults.Model)
	require.Equal(t, &[]string{"http_request", "kv_get", "kv_put", "question", "create_ticket", "deploy_staging"}, c.SessionDefaults.Tools)

	require.Equal(t, settings.Settings{ResumeBudget: 5, StepCap: 50, StreamIdle: 90 * time.Second, MaxClaimAge: 24 * time.Hour,
		SessionPageSize: 100}, c.Settings)

	tools, err := c.Tools(c.EgressPolicy())
	require.NoError(t, err)
	require.Len(t, tools, 2)
	_, err = tool.NewRegistry(tools...)
	require.NoError(t, err)
	require.Equal(t, "create_ticket", tools[0].Spec().Name)
	require.True(t, tools[0].Idempotent())
	require.False(t, tools[1].Idempotent())
	require.Equal(t, "ask", tools[1].(*web.Webhook).Permission())
	require.Equal(t, 2*time.Minute+time.Second, tools[1].Limits().Timeout)
}

func TestEmptyObjectIsTheZeroConfig(t *testing.T) {
	c, err := config.Parse([]byte(" {\n} "))
	require.NoError(t, err)
	require.Equal(t, config.Config{}, c)
	tools, err := c.Tools(c.EgressPolicy())
	require.NoError(t, err)
	require.Empty(t, tools)
	require.Equal(t, web.NewEgress().String(), c.EgressPolicy().String())
}

func TestDefaults(t *testing.T) {
	c, err := config.Parse([]byte(`{
		"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef"}],
		"session_defaults": {"tools": []}
	}`))
	require.NoError(t, err)
	s := c.WebhookTools[0]
	require.Equal(t, "ask", s.Permission)
	require.False(t, s.Idempotent)
	require.Zero(t, s.Timeout, "the egress timeout applies")
	require.Nil(t, s.Parameters)
	require.Equal(t, &[]string{}, c.SessionDefaults.Tools, "an empty list offers no tools")

	c, err = config.Parse([]byte(`{"session_defaults": {"model": "m"}}`))
	require.NoError(t, err)
	require.Nil(t, c.SessionDefaults.Tools, "no list offers every tool")
	require.Nil(t, c.AllowedModels, "no list allows any model")
	require.True(t, c.AllowsModel("o1-pro-expensive"))
	require.NoError(t, c.CheckDefaultModel("o1-pro-expensive"))
}

func TestAllowedModels(t *testing.T) {
	c, err := config.Parse([]byte(`{"allowed_models": ["gpt-4o-mini", "gpt-4o"], "session_defaults": {"model": "gpt-4o"}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"gpt-4o-mini", "gpt-4o"}, c.AllowedModels)
	require.True(t, c.AllowsModel("gpt-4o-mini"))
	require.False(t, c.AllowsModel("o1-pro-expensive"))
	require.False(t, c.AllowsModel(""), "a session names a model or takes the default, which is checked on its own")
	require.NoError(t, c.CheckDefaultModel("gpt-4o"))
	require.NoError(t, c.CheckDefaultModel(""), "the offline model names none")
	require.EqualError(t, c.CheckDefaultModel("o1-pro-expensive"), `the default model "o1-pro-expensive" is not in allowed_models (gpt-4o-mini, gpt-4o)`)
}

func TestFinalRule(t *testing.T) {
	c, err := config.Parse([]byte(`{"permissions": [
		{"action": "deploy_staging", "resource": "*", "decision": "ask", "final": true},
		{"action": "deploy_prod", "resource": "*", "decision": "deny", "final": true},
		{"action": "kv_put", "resource": "*", "decision": "ask", "final": false}]}`))
	require.NoError(t, err)
	require.Equal(t, []config.Rule{
		{Action: "deploy_staging", Resource: "*", Decision: config.Ask, Final: true},
		{Action: "deploy_prod", Resource: "*", Decision: config.Deny, Final: true},
		{Action: "kv_put", Resource: "*", Decision: config.Ask},
	}, c.Permissions)
}

func TestRejects(t *testing.T) {
	hook := func(fields string) string {
		return `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef"` + fields + `}]}`
	}
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"empty file", "  \n", []string{"the file is empty; write {} for the defaults"}},
		{"syntax", "{\n  \"egress\": {\"ports\": [80,]}\n}", []string{"invalid JSON at line 2, column 27: invalid character ']' looking for beginning of value"}},
		{"truncated", "{\n  \"egress\": {\n", []string{"invalid JSON: the text ends early, after line 2, column 13 (truncated?): unexpected end of JSON input"}},
		{"not an object", `[]`, []string{"the file must hold a JSON object"}},
		// json.Unmarshal would read the byte as U+FFFD: a secret signing
		// with other bytes than the file's, a system prompt not the one
		// written.
		{"invalid UTF-8", "{\n  \"session_defaults\": {\"system_prompt\": \"a\xffb\"}\n}", []string{"invalid UTF-8 at line 2, column 43: the file must be UTF-8 text"}},
		// A U+FFFD written as UTF-8 is text: the place named is the bad
		// byte's after it, not the first U+FFFD the decoder reads.
		// Columns count characters, as an editor shows them: the U+FFFD
		// (3 bytes) is one.
		{"invalid UTF-8 after a U+FFFD", "{\n  \"session_defaults\": {\"system_prompt\": \"a\uFFFD\xffb\"}\n}", []string{"invalid UTF-8 at line 2, column 44: the file must be UTF-8 text"}},
		{"syntax after a U+FFFD", "{\n  \"session_defaults\": {\"system_prompt\": \"\uFFFD\uFFFD\"},}\n}", []string{"invalid JSON at line 2, column 47: invalid character '}' looking for beginning of object key string"}},
		// An escape of half a surrogate pair: json.Unmarshal would read it
		// as U+FFFD, as it reads a byte that is not UTF-8.
		{"lone high surrogate", "{\n  \"session_defaults\": {\"system_prompt\": \"\uFFFDa\\ud800b\"}\n}", []string{`invalid escape at line 2, column 44: \ud800 is half a UTF-16 surrogate pair`}},
		{"high surrogate before another escape", `{"session_defaults": {"system_prompt": "\uD83D\u0041"}}`, []string{`invalid escape at line 1, column 41: \uD83D is half a UTF-16 surrogate pair`}},
		{"lone low surrogate", `{"settings": {"heartbeat": "\udc00"}}`, []string{`invalid escape at line 1, column 29: \udc00 is half a UTF-16 surrogate pair`}},
		{"unknown top-level key", `{"webhook_tool": []}`, []string{"webhook_tool: unknown key (did you mean webhook_tools?)"}},
		{"unknown far from any key", `{"extras": 1}`, []string{"extras: unknown key"}},
		{"key given twice", `{"egress": {}, "egress": {}}`, []string{"egress: given twice"}},
		// One problem, reported once: not "unknown key" for each copy.
		{"unknown key given twice", `{"extras": 1, "egress": {"prots": [1], "prots": [2]}, "extras": 2}`, []string{"extras: unknown key", "egress.prots: unknown key (did you mean ports?)"}},
		{"unknown webhook key", `{"webhook_tools": [
			{"name": "a", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef"},
			{"name": "b", "description": "d", "url": "https://h.example.com/x", "secrett": "0123456789abcdef"}]}`,
			[]string{"webhook_tools[1].secrett: unknown key (did you mean secret?)", "webhook_tools[1].secret: required"}},
		{"webhook_tools not an array", `{"webhook_tools": {}}`, []string{"webhook_tools: must be an array"}},
		{"webhook not an object", `{"webhook_tools": ["x"]}`, []string{"webhook_tools[0]: must be an object"}},
		{"missing fields", `{"webhook_tools": [{}]}`, []string{"webhook_tools[0].name: required", "webhook_tools[0].description: required", "webhook_tools[0].url: required", "webhook_tools[0].secret: required"}},
		{"given twice in a tool", hook(`, "name": "m"`), []string{"webhook_tools[0].name: given twice"}},
		{"name shape", `{"webhook_tools": [{"name": "has space", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].name: must be 1 to 64 letters, digits, '_' or '-'"}},
		{"name too long", `{"webhook_tools": [{"name": "` + strings.Repeat("a", 65) + `", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].name: must be 1 to 64 letters"}},
		{"built-in name", `{"webhook_tools": [{"name": "http_request", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef"}]}`, []string{`webhook_tools[0].name: "http_request" is the name of a built-in tool`}},
		{"duplicate names", `{"webhook_tools": [
			{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef"},
			{"name": "n", "description": "d", "url": "https://h.example.com/y", "secret": "0123456789abcdef"}]}`,
			[]string{`webhook_tools[1].name: duplicate tool name "n" (also webhook_tools[0].name)`}},
		{"empty description", `{"webhook_tools": [{"name": "n", "description": " ", "url": "https://h.example.com/x", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].description: must not be empty"}},
		{"url scheme", `{"webhook_tools": [{"name": "n", "description": "d", "url": "ftp://h.example.com/x", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].url: must be an absolute https or http URL"}},
		{"url relative", `{"webhook_tools": [{"name": "n", "description": "d", "url": "/hook", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].url: must be an absolute https or http URL"}},
		{"url credentials", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://u:p@h.example.com/x", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].url: must not contain credentials"}},
		{"url unicode host", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://bücher.example/x", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].url: must name its host in ASCII"}},
		{"url fullwidth host", `{"webhook_tools": [{"name": "n", "description": "d", "url": "http://ｌｏｃａｌｈｏｓｔ:8080/x", "secret": "0123456789abcdef"}]}`, []string{"webhook_tools[0].url: must name its host in ASCII"}},
		{"short secret", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "tooShort15bytes"}]}`, []string{"webhook_tools[0].secret: must be at least 16 bytes"}},
		{"whsec_ not base64", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "whsec_0123456789abcdef*"}]}`, []string{`webhook_tools[0].secret: must be standard base64 of at least 16 bytes after "whsec_"`}},
		{"whsec_ short key", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "whsec_MDEyMzQ1Njc4OWFiY2Rl"}]}`, []string{`webhook_tools[0].secret: must be standard base64 of at least 16 bytes after "whsec_"`}},
		{"secret not a string", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": 1234567890123456789}]}`, []string{"webhook_tools[0].secret: must be a string"}},
		{"idempotent", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "idempotent": "yes"}]}`, []string{"webhook_tools[0].idempotent: must be true or false"}},
		{"timeout zero", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "timeout": "0s"}]}`, []string{"webhook_tools[0].timeout: must be at least 100ms and at most 10m0s"}},
		{"timeout tiny", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "timeout": "1ns"}]}`, []string{"webhook_tools[0].timeout: 1ns is shorter than the least allowed, 100ms (a request fails once it has taken that long, from its dial to the end of its body)"}},
		{"timeout long", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "timeout": "11m"}]}`, []string{"webhook_tools[0].timeout: must be at least 100ms and at most 10m0s"}},
		{"timeout words", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "timeout": "soon"}]}`, []string{`webhook_tools[0].timeout: must be a duration such as "30s" or "2m"`}},
		{"timeout number", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "timeout": 30}]}`, []string{"webhook_tools[0].timeout: must be a string"}},
		{"permission", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "permission": "maybe"}]}`, []string{`webhook_tools[0].permission: must be "allow", "ask" or "deny"`}},
		{"parameters type", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "parameters": {"type": "array"}}]}`, []string{`webhook_tools[0].parameters: must describe an object ("type": "object")`}},
		{"parameters not an object", `{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "0123456789abcdef", "parameters": "x"}]}`, []string{"webhook_tools[0].parameters: must be a JSON schema object"}},
		{"rule decision", `{"permissions": [{"action": "a", "resource": "*", "decision": "yes"}]}`, []string{`permissions[0].decision: must be "allow", "ask" or "deny"`}},
		{"rule shape", `{"permissions": [{"resource": "", "decison": "allow"}]}`, []string{"permissions[0].decison: unknown key (did you mean decision?)", "permissions[0].action: required", "permissions[0].resource: must be 1 to 1024 bytes, not blank", "permissions[0].decision: required"}},
		{"rule action pattern", `{"permissions": [{"action": "http request", "resource": "*", "decision": "ask"}]}`, []string{"permissions[0].action: must be a tool name, with '*' for any run of characters"}},
		{"rule resource control", `{"permissions": [{"action": "t*", "resource": "a\nb", "decision": "ask"}]}`, []string{"permissions[0].resource: must not contain control characters"}},
		{"rule final allow", `{"permissions": [{"action": "t", "resource": "a", "decision": "allow", "final": true}]}`, []string{`permissions[0].final: only an "ask" or "deny" rule can be final`}},
		{"rule final type", `{"permissions": [{"action": "t", "resource": "a", "decision": "ask", "final": "yes"}]}`, []string{"permissions[0].final: must be true or false"}},
		{"allowed_models empty", `{"allowed_models": []}`, []string{"allowed_models: must not be empty; leave the key out for the default"}},
		{"allowed_models not a list", `{"allowed_models": "gpt-4o"}`, []string{"allowed_models: must be an array"}},
		{"allowed_models items", `{"allowed_models": ["a", "", 5, "a"]}`, []string{"allowed_models[1]: must not be empty", "allowed_models[2]: must be a string", `allowed_models[3]: "a" is given twice (also allowed_models[0])`}},
		{"default model not allowed", `{"allowed_models": ["a"], "session_defaults": {"model": "b"}}`, []string{`session_defaults.model: "b" is not in allowed_models`}},
		{"rule exact", `{"permissions": [{"action": "t", "resource": "a", "decision": "ask", "exact": true}]}`, []string{"permissions[0].exact: unknown key"}},
		{"egress unknown", `{"egress": {"port": [80]}}`, []string{"egress.port: unknown key (did you mean ports?)"}},
		{"port zero", `{"egress": {"ports": [0]}}`, []string{"egress.ports[0]: must be 1–65535"}},
		{"port high", `{"egress": {"ports": [443, 70000]}}`, []string{"egress.ports[1]: must be 1–65535"}},
		{"port string", `{"egress": {"ports": ["80"]}}`, []string{"egress.ports[0]: must be an integer"}},
		{"port fraction", `{"egress": {"ports": [80.5]}}`, []string{"egress.ports[0]: must be an integer"}},
		{"ports empty", `{"egress": {"ports": []}}`, []string{"egress.ports: must not be empty; leave the key out for the default"}},
		{"schemes", `{"egress": {"schemes": ["https", "ftp"]}}`, []string{`egress.schemes[1]: must be "https" or "http"`}},
		{"schemes empty", `{"egress": {"schemes": []}}`, []string{"egress.schemes: must not be empty"}},
		{"hosts", `{"egress": {"hosts": ["ok.example.com", "bad host", "*.", "-x.com", "x-.com", "a..b", "` + strings.Repeat("l", 64) + `.com"]}}`,
			[]string{"egress.hosts[1]: must be a host name", "egress.hosts[2]: must be a host name", "egress.hosts[3]: must be a host name",
				"egress.hosts[4]: must be a host name", "egress.hosts[5]: must be a host name", "egress.hosts[6]: must be a host name"}},
		{"ports repeated", `{"egress": {"ports": [443, 80, 443]}}`, []string{"egress.ports[2]: 443 is given twice (also egress.ports[0])"}},
		{"schemes repeated", `{"egress": {"schemes": ["https", "https"]}}`, []string{`egress.schemes[1]: "https" is given twice (also egress.schemes[0])`}},
		{"hosts repeated", `{"egress": {"hosts": ["a.example.com", "*.b.example", "A.Example.com."]}}`, []string{`egress.hosts[2]: "A.Example.com." is given twice (also egress.hosts[0])`}},
		{"default tools repeated", `{"session_defaults": {"tools": ["kv_get", "task", "kv_get"]}}`, []string{`session_defaults.tools[2]: "kv_get" is given twice (also session_defaults.tools[0])`}},
		{"cidrs repeated", `{"egress": {"allow_cidrs": ["10.0.0.0/8", "fd00::/8", "10.0.0.0/8"]}}`, []string{`egress.allow_cidrs[2]: "10.0.0.0/8" is given twice (also egress.allow_cidrs[0])`}},
		{"cidr host bits", `{"egress": {"allow_cidrs": ["10.1.2.3/8"]}}`, []string{"egress.allow_cidrs[0]: has bits set past the prefix length; did you mean 10.0.0.0/8?"}},
		{"cidr bare address", `{"egress": {"allow_cidrs": ["10.1.2.3"]}}`, []string{"egress.allow_cidrs[0]: must be a CIDR such as 10.0.0.0/8 or fd00::/8"}},
		{"max bytes", `{"egress": {"max_response_bytes": 0}}`, []string{"egress.max_response_bytes: must be 1–1073741824"}},
		{"egress timeout", `{"egress": {"timeout": "1h"}}`, []string{"egress.timeout: must be at least 100ms and at most 10m0s"}},
		{"egress timeout tiny", `{"egress": {"timeout": "99ms"}}`, []string{"egress.timeout: 99ms is shorter than the least allowed, 100ms (a request fails once it has taken that long, from its dial to the end of its body)"}},
		{"settings stream_idle tiny", `{"settings": {"stream_idle": "1ns"}}`, []string{"settings.stream_idle: 1ns is shorter than the least allowed, 1s"}},
		{"settings checkpoint_every tiny", `{"settings": {"checkpoint_every": "1ns"}}`, []string{"settings.checkpoint_every: 1ns is shorter than the least allowed, 100ms"}},
		{"settings step_wall tiny", `{"settings": {"step_wall": "999ms"}}`, []string{"settings.step_wall: 999ms is shorter than the least allowed, 1s"}},
		{"settings tool_timeout tiny", `{"settings": {"tool_timeout": "1ns"}}`, []string{"settings.tool_timeout: 1ns is shorter than the least allowed, 100ms"}},
		{"settings retry_initial tiny", `{"settings": {"retry_initial": "99ms"}}`, []string{"settings.retry_initial: 99ms is shorter than the least allowed, 100ms"}},
		{"settings retry_max tiny", `{"settings": {"retry_initial": "1ns", "retry_max": "1ns"}}`, []string{"settings.retry_initial: 1ns is shorter than the least allowed, 100ms", "settings.retry_max: 1ns is shorter than the least allowed, 100ms"}},
		{"settings max_retry_after tiny", `{"settings": {"max_retry_after": "999ms"}}`, []string{"settings.max_retry_after: 999ms is shorter than the least allowed, 1s"}},
		{"settings interrupt_grace tiny", `{"settings": {"interrupt_grace": "1ns"}}`, []string{"settings.interrupt_grace: 1ns is shorter than the least allowed, 100ms"}},
		{"settings max_claim_age tiny", `{"settings": {"max_claim_age": "59s"}}`, []string{"settings.max_claim_age: 59s is shorter than the least allowed, 1m0s"}},
		{"egress null", `{"egress": null}`, []string{"egress: must be an object"}},
		{"session tools", `{"session_defaults": {"tools": ["ok", "not ok"]}}`, []string{"session_defaults.tools[1]: must be 1 to 64 letters"}},
		{"session model", `{"session_defaults": {"model": 5}}`, []string{"session_defaults.model: must be a string"}},
		{"session unknown", `{"session_defaults": {"system": "x"}}`, []string{"session_defaults.system: unknown key"}},
		{"settings unknown", `{"settings": {"step_capp": 3}}`, []string{"settings.step_capp: unknown key (did you mean step_cap?)"}},
		{"settings not an object", `{"settings": []}`, []string{"settings: must be an object"}},
		{"settings zero count", `{"settings": {"step_cap": 0}}`, []string{"settings.step_cap: must be at least 1; leave the key out for the default"}},
		{"settings zero queue cap", `{"settings": {"queue_cap": 0}}`, []string{"settings.queue_cap: must be at least 1; leave the key out for the default"}},
		{"settings queue cap past its bound", `{"settings": {"queue_cap": 1001}}`, []string{"settings.queue_cap: 1001 is above the largest allowed, 1000 (a snapshot lists every prompt not ended, and an interrupt cancels them all in one transaction)"}},
		{"settings zero sub-agents", `{"settings": {"max_subagents": 0}}`, []string{"settings.max_subagents: must be at least 1; leave the key out for the default"}},
		{"settings negative sub-agents", `{"settings": {"max_subagents": -3}}`, []string{"settings.max_subagents: must be at least 1; leave the key out for the default"}},
		{"settings negative none", `{"settings": {"resume_budget": -1}}`, []string{"settings.resume_budget: must be 0 or more"}},
		{"settings count type", `{"settings": {"max_body": "1MB"}}`, []string{"settings.max_body: must be an integer"}},
		{"settings count range", `{"settings": {"context_bytes": 4294967296}}`, []string{"settings.context_bytes: must be at most 2147483647"}},
		{"settings count past int64", `{"settings": {"resume_budget": 99999999999999999999}}`, []string{"settings.resume_budget: 99999999999999999999 is out of range"}},
		{"port past int64", `{"egress": {"ports": [-99999999999999999999]}}`, []string{"egress.ports[0]: -99999999999999999999 is out of range"}},
		{"settings zero duration", `{"settings": {"wake_interval": "0s"}}`, []string{"settings.wake_interval: must be more than 0; leave the key out for the default"}},
		{"settings duration type", `{"settings": {"heartbeat": 15}}`, []string{"settings.heartbeat: must be a string"}},
		{"settings duration syntax", `{"settings": {"step_wall": "ten minutes"}}`, []string{`settings.step_wall: must be a duration such as "30s" or "2m"`}},
		// Well formed, but past time.Duration: not "must be a duration".
		{"settings duration too long", `{"settings": {"stream_idle": "99999999h"}}`, []string{`settings.stream_idle: 99999999h is out of range: a duration is at most 2562047h47m16.854775807s`}},
		{"egress timeout too long", `{"egress": {"timeout": "-9999999999.5h"}}`, []string{`egress.timeout: -9999999999.5h is out of range`}},
		{"duration unit unknown", `{"settings": {"heartbeat": "99999999999d"}}`, []string{`settings.heartbeat: must be a duration such as "30s" or "2m"`}},
		{"settings page size", `{"settings": {"message_page_size": 501}}`, []string{"settings.message_page_size: 501 is above the most a request may ask for, 500"}},
		{"settings retry delays", `{"settings": {"retry_initial": "2m"}}`, []string{"settings.retry_initial: 2m0s is longer than retry_max (1m0s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.json))
			require.Error(t, err)
			require.Equal(t, config.Config{}, c)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			var es config.Errors
			require.True(t, errors.As(err, &es))
			require.Len(t, es, len(tc.want), err.Error())
			var one *config.Error
			require.True(t, errors.As(err, &one))
		})
	}
}

// A surrogate pair escaped whole is the character it names, and an
// escaped backslash before "ud800" is no escape: both are read as written.
func TestSurrogatePairAccepted(t *testing.T) {
	c, err := config.Parse([]byte(`{"session_defaults": {"system_prompt": "\ud83d\ude00 \\ud800 \u00e9"}}`))
	require.NoError(t, err)
	require.Equal(t, "\U0001F600 \\ud800 \u00e9", c.SessionDefaults.SystemPrompt)
}

// TestEveryProblemReported: one run lists every problem, each naming its
// key, so an operator fixes the file in one pass.
func TestEveryProblemReported(t *testing.T) {
	_, err := config.Parse([]byte(`{
		"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secrett": "0123456789abcdef"}],
		"egress": {"ports": [0, 443]},
		"session_defaults": {"modle": "m"}
	}`))
	var es config.Errors
	require.True(t, errors.As(err, &es))
	keys := make([]string, len(es))
	for i, e := range es {
		keys[i] = e.Key
	}
	require.Equal(t, []string{"webhook_tools[0].secrett", "webhook_tools[0].secret", "egress.ports[0]", "session_defaults.modle"}, keys)
	require.Equal(t, "webhook_tools[0].secrett: unknown key (did you mean secret?); webhook_tools[0].secret: required; "+
		"egress.ports[0]: must be 1–65535; session_defaults.modle: unknown key (did you mean model?)", err.Error())
}

// Where zero means something, a file's 0 is zero (settings.None): a key
// left out is the default.
func TestSettingsZeroIsNone(t *testing.T) {
	c, err := config.Parse([]byte(`{"settings": {"resume_budget": 0, "model_retries": 0, "max_body": 4096, "retry_initial": "2m"}}`))
	require.NoError(t, err, "with no retries, the delays do not matter")
	require.Equal(t, settings.Settings{ResumeBudget: settings.None, ModelRetries: settings.None, MaxBody: 4096, RetryInitial: 2 * time.Minute}, c.Settings)
}

// queue_cap reaches the settings and core's config.
func TestSettingsQueueCap(t *testing.T) {
	c, err := config.Parse([]byte(`{"settings": {"queue_cap": 7}}`))
	require.NoError(t, err)
	require.Equal(t, settings.Settings{QueueCap: 7}, c.Settings)
	cfgs, err := c.Settings.Configs()
	require.NoError(t, err)
	require.Equal(t, 7, cfgs.Core.QueueCap())
}

// max_subagents reaches the settings and the runner's config.
func TestSettingsMaxSubagents(t *testing.T) {
	c, err := config.Parse([]byte(`{"settings": {"max_subagents": 5}}`))
	require.NoError(t, err)
	require.Equal(t, settings.Settings{MaxSubagents: 5}, c.Settings)
	cfgs, err := c.Settings.Configs()
	require.NoError(t, err)
	require.Equal(t, runner.NewConfig().WithMaxSubagents(5), cfgs.Runner)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	_, err := config.Load(filepath.Join(dir, "missing.json"))
	require.ErrorContains(t, err, "read config: open ")
	require.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"egress": {"ports": [0]}}`), 0o600))
	_, err = config.Load(path)
	require.EqualError(t, err, "config "+path+": egress.ports[0]: must be 1–65535")
	var e *config.Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "egress.ports[0]", e.Key)

	// A path to something that is no config file (a device, a log) is
	// refused once it passes the cap, not read to the end: /dev/zero
	// would grow the process until the kernel killed it.
	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, make([]byte, config.MaxFileBytes+1), 0o600))
	_, err = config.Load(big)
	require.EqualError(t, err, "config "+big+": larger than 4194304 bytes; is it the configuration file?")
	if _, statErr := os.Stat("/dev/zero"); statErr == nil {
		_, err = config.Load("/dev/zero")
		require.ErrorContains(t, err, "larger than 4194304 bytes")
	}
}

// TestSecretsNeverPrint: however a Config is printed, marshalled, logged or
// rejected, its secrets do not show.
func TestSecretsNeverPrint(t *testing.T) {
	c, err := config.Parse([]byte(exampleConfig))
	require.NoError(t, err)
	secrets := []string{c.WebhookTools[0].Secret.Reveal(), c.WebhookTools[1].Secret.Reveal()}
	require.Equal(t, "replace-me-with-a-long-random-string-2", secrets[1])

	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c), fmt.Sprintf(verb, c.WebhookTools),
			fmt.Sprintf(verb, struct{ C *config.Config }{&c}))
	}
	j, err := json.Marshal(c)
	require.NoError(t, err)
	outs = append(outs, string(j))
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("loaded", "config", c, "tools", c.WebhookTools)
	outs = append(outs, logged.String())
	tools, err := c.Tools(c.EgressPolicy())
	require.NoError(t, err)
	outs = append(outs, fmt.Sprintf("%v %+v %#v", tools, tools, tools))

	for _, out := range outs {
		for _, s := range secrets {
			require.NotContains(t, out, s)
			require.NotContains(t, out, fmt.Sprintf("%x", s))
		}
	}
	require.Contains(t, fmt.Sprintf("%+v", c), "Secret:[redacted]")

	// A rejected secret is not quoted either.
	_, err = config.Parse([]byte(`{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x", "secret": "short-secret"}]}`))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "short-secret")
}

// TestWebhookFromConfig: a configured webhook on loopback, with no egress
// allowance (its URL is the operator's), is called with its configured
// secret's signature, while http_request under the same policy may not
// reach that address.
func TestWebhookFromConfig(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "done")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()

	c, err := config.Parse(fmt.Appendf(nil, `{
		"webhook_tools": [{"name": "notify", "description": "Notify the team.", "url": %q,
			"secret": "a-secret-of-some-length", "idempotent": true, "permission": "allow"}],
		"egress": {"ports": [%d]}
	}`, srv.URL+"/notify", port))
	require.NoError(t, err)
	policy := webnet.Dialing(c.EgressPolicy())
	tools, err := c.Tools(policy)
	require.NoError(t, err)
	out, err := tools[0].Execute(context.Background(), tool.Call{ID: "c1", Arguments: json.RawMessage(`{"text":"hi"}`), IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.Equal(t, "done", out)
	require.Equal(t, `{"text":"hi"}`, string(body))
	require.Equal(t, "k1", got.Header.Get("Idempotency-Key"))
	key, err := web.SigningKey("a-secret-of-some-length")
	require.NoError(t, err)
	require.NoError(t, web.Verify(key, got.Header, body, time.Now()))
	require.Equal(t, "k1", got.Header.Get("webhook-id"))

	// The trust is the webhook's alone.
	call, _ := json.Marshal(map[string]any{"url": srv.URL + "/notify"})
	_, err = web.NewHTTPRequest(policy).Execute(context.Background(), tool.Call{ID: "c2", Arguments: call, IdempotencyKey: "k2"})
	require.ErrorIs(t, err, web.ErrDenied)
}

// TestWebhookStandardSecret: a secret in the Standard Webhooks form is
// accepted and signs with the key its base64 decodes to.
func TestWebhookStandardSecret(t *testing.T) {
	c, err := config.Parse([]byte(`{"webhook_tools": [{"name": "n", "description": "d", "url": "https://h.example.com/x",
		"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]}`))
	require.NoError(t, err)
	_, err = c.Tools(c.EgressPolicy())
	require.NoError(t, err)
}

// An empty hosts list would mean "any public host": it fails open, so it is
// refused like an empty schemes or ports list.
func TestEmptyHostsListRefused(t *testing.T) {
	_, err := config.Parse([]byte(`{"egress":{"hosts":[]}}`))
	require.ErrorContains(t, err, "egress.hosts")
}

// A webhook's host is an ASCII name or an IP literal; an internationalized
// name is written in its xn-- form, which is what every transport dials.
func TestWebhookHostForms(t *testing.T) {
	for _, u := range []string{"https://xn--bcher-kva.example/x", "http://[::1]:8080/x", "http://127.0.0.1:8080/x", "https://Hooks.Example_1.com/x"} {
		_, err := config.Parse([]byte(`{"webhook_tools": [{"name": "n", "description": "d", "url": "` + u + `", "secret": "0123456789abcdef"}]}`))
		require.NoError(t, err, u)
	}
}

// A request timeout may be MinTimeout itself, in the egress policy and on
// a webhook.
func TestTimeoutFloorAllowed(t *testing.T) {
	c, err := config.Parse([]byte(`{"egress": {"timeout": "100ms"}, "webhook_tools": [{"name": "n", "description": "d",
		"url": "https://h.example.com/x", "secret": "0123456789abcdef", "timeout": "100ms"}]}`))
	require.NoError(t, err)
	require.Equal(t, config.MinTimeout, c.EgressPolicy().Timeout())
	require.Equal(t, config.MinTimeout, c.WebhookTools[0].Timeout)
}

// An egress port list takes the bounds of a port, 1 and 65535, and the
// policy it builds lets a URL through at either.
func TestEgressPortBounds(t *testing.T) {
	c, err := config.Parse([]byte(`{"egress": {"ports": [1, 65535]}}`))
	require.NoError(t, err)
	for _, u := range []string{"https://example.com:1/", "https://example.com:65535/"} {
		parsed, err := url.Parse(u)
		require.NoError(t, err)
		require.NoError(t, c.EgressPolicy().CheckURL(parsed), u)
	}
}

// TestDurationSyntax: what config reports as out of range is exactly what
// time.ParseDuration would read if it fit, so a typo is never called too
// long, nor an overflow a typo.
func TestDurationSyntax(t *testing.T) {
	for _, s := range []string{"0", "-0", "+0", "1h", "1.5h", ".5s", "1.s", "1h2m3s", "1µs", "1μs", "1us", "-2ns", "99999999999999999999h"} {
		require.True(t, config.DurationSyntax(s), s)
	}
	for _, s := range []string{"", "-", "h", "1", "1x", "1d", ".h", "1h2", "1..5s", "1 h", "ten minutes", "0x10s", "1hh"} {
		require.False(t, config.DurationSyntax(s), s)
		_, err := time.ParseDuration(s)
		require.Error(t, err, s)
	}
}
