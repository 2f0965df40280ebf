//go:build js && wasm

package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/durableobject"
	"github.com/revenantrt/revenant/tools/web"
)

const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseTools(t *testing.T) {
	raw := `{"egress":{"allow_cidrs":["10.0.0.0/8"],"timeout":"5s"},
	 "webhook_tools":[{"name":"ledger","description":"Record a payment.","url":"http://127.0.0.1:9/hook","secret_env":"LEDGER_SECRET"}]}`
	c, err := parseTools(raw, env(map[string]string{"LEDGER_SECRET": hookSecret}))
	require.NoError(t, err)
	require.Len(t, c.WebhookTools, 1)
	assert.Equal(t, hookSecret, c.WebhookTools[0].Secret.Reveal())
	assert.NotContains(t, fmt.Sprintf("%v %+v", c, c), hookSecret, "the secret never prints")

	tools, err := webTools(c, durableobject.Fetch{})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Spec().Name)
	}
	assert.Equal(t, []string{web.HTTPRequestName, "ledger"}, names)
	assert.False(t, tools[1].Idempotent(), "idempotent only if configured")

	empty, err := parseTools(" ", env(nil))
	require.NoError(t, err)
	assert.Empty(t, empty.WebhookTools)
}

// The operator's model allow-list and final rules reach the object from
// REVENANT_TOOLS through the same config/ code as the local server's file;
// the default model (REVENANT_MODEL) must be in the list.
func TestParseToolsModelsAndFinalRules(t *testing.T) {
	c, err := parseTools(`{"allowed_models":["gpt-4o-mini"],
	 "permissions":[{"action":"deploy_staging","resource":"*","decision":"ask","final":true}]}`, env(nil))
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o-mini"}, c.AllowedModels)
	assert.True(t, c.Permissions[0].Final)
	assert.NoError(t, c.CheckDefaultModel("gpt-4o-mini"))
	assert.Error(t, c.CheckDefaultModel("o1-pro-expensive"))
}

func TestParseToolsRefuses(t *testing.T) {
	secrets := env(map[string]string{"LEDGER_SECRET": hookSecret, "SHORT": "short", "REVENANT_TOKENS": "alice:" + hookSecret})
	hook := func(extra string) string {
		return `{"webhook_tools":[{"name":"ledger","description":"d","url":"https://example.com/h"` + extra + `}]}`
	}
	for raw, msg := range map[string]string{
		`[]`:                                    "REVENANT_TOOLS: not a JSON object",
		`null`:                                  "REVENANT_TOOLS: not a JSON object", // it is a var, not a file
		` 5 `:                                   "REVENANT_TOOLS: not a JSON object",
		`{"webhook_tools":null}`:                "REVENANT_TOOLS: webhook_tools: must be an array of objects",
		`{"webhook_tools":[null]}`:              "REVENANT_TOOLS: webhook_tools: must be an array of objects",
		`{"settings":{}}`:                       "REVENANT_TOOLS: settings: unknown key (allowed: webhook_tools, permissions, egress, allowed_models; settings go in REVENANT_SETTINGS)",
		hook(`,"secret":"` + hookSecret + `"`):  "REVENANT_TOOLS: webhook_tools[0].secret: give the Worker secret's name as secret_env instead",
		hook(``):                                "REVENANT_TOOLS: webhook_tools[0].secret_env: required",
		hook(`,"secret_env":""`):                "REVENANT_TOOLS: webhook_tools[0].secret_env: must be a Worker secret's name",
		hook(`,"secret_env":"MISSING"`):         "REVENANT_TOOLS: webhook_tools[0].secret_env: the Worker secret MISSING is not set (wrangler secret put MISSING; for make dev, a line MISSING=… in .dev.vars)",
		hook(`,"secret_env":"SHORT"`):           "webhook_tools[0].secret: must be at least 16 bytes",
		hook(`,"secret_env":"REVENANT_TOKENS"`): "webhook_tools[0].secret_env: REVENANT_TOKENS holds the API's bearer tokens and is never given to a tree",
		`{"permissions":[{"action":"t","resource":"*","decision":"no"}]}`: `permissions[0].decision: must be "allow", "ask" or "deny"`,
		`{"egress":{"ports":[0]}}`:                                        "egress.ports[0]: must be 1–65535",
		`{"egress":{"timeout":"1ns"}}`:                                    "REVENANT_TOOLS: egress.timeout: 1ns is shorter than the least allowed, 100ms",
		`{"allowed_models":[]}`:                                           "allowed_models: must not be empty",
		// A key given twice is refused, as REVENANT_CONFIG refuses it, not
		// read as its last value (which here would drop the deny rule).
		`{"permissions":[{"action":"http_request","resource":"*","decision":"deny"}],"permissions":[]}`: "REVENANT_TOOLS: permissions: given twice",
		`{"egress":{},"\u0065gress":{}}`:                                        "REVENANT_TOOLS: egress: given twice",
		hook(`,"secret_env":"LEDGER_SECRET","url":"https://example.com/other"`): "REVENANT_TOOLS: webhook_tools[0].url: given twice",
		hook(`,"secret_env":"LEDGER_SECRET","secret_env":"LEDGER_SECRET"`):      "REVENANT_TOOLS: webhook_tools[0].secret_env: given twice",
	} {
		_, err := parseTools(raw, secrets)
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), msg, raw)
		assert.NotContains(t, err.Error(), hookSecret)
	}
}
