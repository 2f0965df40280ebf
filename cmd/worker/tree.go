//go:build js && wasm

package main

import (
	"fmt"
	"os"
	"strings"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/config"
	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/model/openai"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/durableobject"
)

// serveTree is the tree role: one Durable Object's tree behind bridge
// (durableobject.Serve), configured from the Worker's vars. It never
// returns.
func serveTree(bridge js.Value) {
	p, err := load()
	if err != nil {
		// The object cannot serve without its configuration: the boot
		// fails with the reason, on every event, until the vars are fixed.
		durableobject.Serve(bridge, durableobject.Options{Setup: func(core.Clock) (core.Config, core.Driver, error) {
			return core.Config{}, nil, err
		}})
	}
	durableobject.Serve(bridge, durableobject.Options{Setup: p.setup, API: &p.configs.API})
}

// wakeInterval is how far ahead a claim arms the alarm unless
// REVENANT_SETTINGS sets wake_interval. Nothing else wakes an object after
// a crash or an eviction (no process boots it), so this bounds how long a
// killed turn waits to resume; a turn that runs is not disturbed, since
// the alarm handler holds while it runs and re-arms after.
const wakeInterval = time.Second

// SettingsVar names the Worker var holding the trees' settings: a JSON
// object like the "settings" section of a REVENANT_CONFIG file, read by
// config/ (every field, its name, its checks).
const SettingsVar = "REVENANT_SETTINGS"

// program is the object's configuration, read once from the Worker's vars.
type program struct {
	configs       settings.Configs
	maxRetryAfter time.Duration
	tools         config.Config // REVENANT_TOOLS: webhook tools, permission rules, the egress policy, allowed models
}

func load() (*program, error) {
	s, err := parseSettings(os.Getenv(SettingsVar))
	if err != nil {
		return nil, err
	}
	if s.WakeInterval == 0 {
		s.WakeInterval = wakeInterval
	}
	configs, err := s.Configs()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SettingsVar, err)
	}
	tools, err := parseTools(os.Getenv(ToolsVar), os.Getenv)
	if err != nil {
		return nil, err
	}
	// A create naming a model outside allowed_models is refused by the
	// object's API, as on the local server.
	configs.API = configs.API.WithAllowedModels(tools.AllowedModels)
	return &program{configs: configs, maxRetryAfter: s.MaxRetryAfter, tools: tools}, nil
}

// parseSettings reads raw as config/ reads a file's "settings" section.
// raw is spliced into that file's text, so it must be one JSON value: text
// after it would read as more of the file, and its other sections would be
// accepted and never used.
func parseSettings(raw string) (settings.Settings, error) {
	if strings.TrimSpace(raw) == "" {
		return settings.Settings{}, nil
	}
	// One JSON value, its errors placed in the var's own text: read as a
	// file's "settings", text after the object would read as more of
	// that file (other sections, accepted and never used).
	if err := config.CheckSyntax([]byte(raw)); err != nil {
		return settings.Settings{}, fmt.Errorf("%s: %w; give one JSON object, such as {\"max_body\": 2097152}", SettingsVar, err)
	}
	c, err := config.Parse([]byte(`{"settings":` + raw + `}`))
	if err != nil {
		return settings.Settings{}, fmt.Errorf("%s: %w", SettingsVar, err)
	}
	return c.Settings, nil
}

// setup builds the turn driver: the model (provider or offline) with the
// tools the local server has: kv_get, kv_put, http_request and the webhook
// tools of REVENANT_TOOLS, their egress through the Workers fetch under
// its egress policy.
func (p *program) setup(clock core.Clock) (core.Config, core.Driver, error) {
	cfg := p.configs.Core
	m, err := p.model(clock)
	if err != nil {
		return cfg, nil, err
	}
	web, err := webTools(p.tools, durableobject.Fetch{})
	if err != nil {
		return cfg, nil, err
	}
	registry, err := tool.NewRegistry(append(tool.Defaults(), web...)...)
	if err != nil {
		return cfg, nil, err
	}
	// Permission rules, each webhook's permission and the allowed models
	// are enforced by the runner, as on the local server.
	driver, err := runner.New(m, registry, p.configs.Runner.WithPermissions(p.tools.Permissions).WithAllowedModels(p.tools.AllowedModels))
	return cfg, driver, err
}

// model is the provider config.ChooseProvider picks from OPENAI_BASE_URL,
// the OPENAI_API_KEY secret and REVENANT_MODEL, the rule the local server
// applies (its requests through the Workers fetch), the offline model when
// none of them is set. A choice that is an error (a model without a
// provider, a provider without a model) fails the boot with its reason.
func (p *program) model(clock core.Clock) (model.Model, error) {
	key := os.Getenv("OPENAI_API_KEY")
	provider, err := config.ChooseProvider(os.Getenv("OPENAI_BASE_URL"), key, os.Getenv("REVENANT_MODEL"), "")
	if err != nil {
		return nil, err
	}
	if err := p.tools.CheckDefaultModel(provider.Model); err != nil {
		return nil, fmt.Errorf("REVENANT_MODEL and %s: %w", ToolsVar, err)
	}
	if !provider.Offline() {
		m, err := openai.New(openai.Config{BaseURL: provider.BaseURL, Model: provider.Model, APIKey: key,
			Client: durableobject.Fetch{}, MaxRetryAfter: p.maxRetryAfter})
		if err != nil {
			return nil, fmt.Errorf("model (OPENAI_BASE_URL, REVENANT_MODEL): %w", err)
		}
		return m, nil
	}
	var delay time.Duration
	if s := os.Getenv("REVENANT_OFFLINE_WORD_DELAY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("REVENANT_OFFLINE_WORD_DELAY: %w", err)
		}
		if d < 0 {
			// As the local server's -offline-word-delay.
			return nil, fmt.Errorf("REVENANT_OFFLINE_WORD_DELAY: %v is negative (want 0 or more, e.g. 30ms)", d)
		}
		delay = d
	}
	return offline.New(clock, offline.Options{WordDelay: delay}), nil
}
