//go:build js && wasm

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/revenantrt/revenant/config"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
)

// ToolsVar names the Worker var holding the tools' configuration: a JSON
// object with the "webhook_tools", "permissions", "egress" and
// "allowed_models" sections of a REVENANT_CONFIG file, read by config/
// (every key, its checks), except
// that a webhook names its signing secret by the Worker secret holding it,
// "secret_env": "NAME" (wrangler secret put NAME), instead of giving it
// inline: a var is plain text in wrangler.toml and the dashboard.
const ToolsVar = "REVENANT_TOOLS"

// toolsSections are the REVENANT_CONFIG sections ToolsVar may hold; the
// settings are REVENANT_SETTINGS'.
var toolsSections = []string{"webhook_tools", "permissions", "egress", "allowed_models"}

// parseTools reads raw (ToolsVar's value) with config/, each webhook's
// secret_env looked up with getenv. Errors name the key and never quote a
// secret.
func parseTools(raw string, getenv func(string) string) (config.Config, error) {
	if strings.TrimSpace(raw) == "" {
		return config.Config{}, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &top); err != nil {
		return config.Config{}, fmt.Errorf("%s: not a JSON object: %w", ToolsVar, err)
	}
	if top == nil {
		// null decodes into a nil map without an error; config/ would
		// then speak of "the file", which a var is not.
		return config.Config{}, fmt.Errorf("%s: not a JSON object: null", ToolsVar)
	}
	if err := keysOnce([]byte(raw), ""); err != nil {
		return config.Config{}, fmt.Errorf("%s: %w", ToolsVar, err)
	}
	for k := range top {
		if !slices.Contains(toolsSections, k) {
			return config.Config{}, fmt.Errorf("%s: %s: unknown key (allowed: %s; settings go in %s)", ToolsVar, k, strings.Join(toolsSections, ", "), SettingsVar)
		}
	}
	if hooks, ok := top["webhook_tools"]; ok {
		// null decodes into a nil slice or map without an error and would
		// reach config/ re-encoded as [] or {}, which it accepts where it
		// refuses the null written: refuse it here.
		var rawItems []json.RawMessage
		if err := json.Unmarshal(hooks, &rawItems); err != nil || rawItems == nil {
			return config.Config{}, fmt.Errorf("%s: webhook_tools: must be an array of objects", ToolsVar)
		}
		items := make([]map[string]json.RawMessage, len(rawItems))
		for i, rawItem := range rawItems {
			if err := json.Unmarshal(rawItem, &items[i]); err != nil || items[i] == nil {
				return config.Config{}, fmt.Errorf("%s: webhook_tools: must be an array of objects", ToolsVar)
			}
			key := fmt.Sprintf("webhook_tools[%d]", i)
			if err := keysOnce(rawItem, key+"."); err != nil {
				return config.Config{}, fmt.Errorf("%s: %w", ToolsVar, err)
			}
			item := items[i]
			if _, inline := item["secret"]; inline {
				return config.Config{}, fmt.Errorf("%s: %s.secret: give the Worker secret's name as secret_env instead (a var is not secret)", ToolsVar, key)
			}
			nameRaw, ok := item["secret_env"]
			if !ok {
				return config.Config{}, fmt.Errorf("%s: %s.secret_env: required: the name of the Worker secret holding the signing secret", ToolsVar, key)
			}
			var name string
			if err := json.Unmarshal(nameRaw, &name); err != nil || name == "" {
				return config.Config{}, fmt.Errorf("%s: %s.secret_env: must be a Worker secret's name", ToolsVar, key)
			}
			if name == "REVENANT_TOKENS" {
				// durableobject/shim.js keeps the front's tokens from every tree.
				return config.Config{}, fmt.Errorf("%s: %s.secret_env: REVENANT_TOKENS holds the API's bearer tokens and is never given to a tree; give the webhook a secret of its own", ToolsVar, key)
			}
			secret := getenv(name)
			if secret == "" {
				return config.Config{}, fmt.Errorf("%s: %s.secret_env: the Worker secret %s is not set (wrangler secret put %s; for make dev, a line %s=… in .dev.vars)", ToolsVar, key, name, name, name)
			}
			delete(item, "secret_env")
			b, err := json.Marshal(secret)
			if err != nil {
				return config.Config{}, fmt.Errorf("%s: %s.secret_env: the secret %s is not a string", ToolsVar, key, name)
			}
			item["secret"] = b
		}
		b, err := json.Marshal(items)
		if err != nil {
			return config.Config{}, fmt.Errorf("%s: webhook_tools: %w", ToolsVar, err)
		}
		top["webhook_tools"] = b
	}
	data, err := json.Marshal(top)
	if err != nil {
		return config.Config{}, fmt.Errorf("%s: %w", ToolsVar, err)
	}
	c, err := config.Parse(data)
	if err != nil {
		return config.Config{}, fmt.Errorf("%s: %w", ToolsVar, err)
	}
	return c, nil
}

// keysOnce refuses a key given twice in obj, a JSON object (or null)
// already decoded into a map, naming it after prefix. parseTools reads the
// top object and each webhook tool into maps, which keep a repeated key's
// last value silently; REVENANT_CONFIG's parser refuses the key instead
// (config/), and so does this var. Deeper objects reach config/ as
// written.
func keysOnce(obj []byte, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := tok.(string)
		if seen[k] {
			return fmt.Errorf("%s%s: given twice", prefix, k)
		}
		seen[k] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return err
		}
	}
	return nil
}

// webTools builds http_request and the webhook tools of c under its
// egress policy, every request sent by rt (the Workers fetch) after the
// policy's checks (tools/web.Egress.WithTransport).
func webTools(c config.Config, rt httpmsg.Doer) ([]tool.Tool, error) {
	policy := c.EgressPolicy().WithTransport(rt)
	webhooks, err := c.Tools(policy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ToolsVar, err)
	}
	return append([]tool.Tool{web.NewHTTPRequest(policy)}, webhooks...), nil
}
