//go:build js && wasm

// Command object is the Go program of revenant's Durable Object: one
// instance per object, started by durableobject/shim.js, which passes the
// object's bridge key and the Worker's vars in the environment.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall/js"
	"time"

	"github.com/revenantrt/revenant/config"
	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/durableobject"
)

// bridgesVar is the global under which the shim parks each object's bridge
// for the moment its Go program starts; REVENANT_BRIDGE names the entry.
const bridgesVar = "__revenantBridges"

func main() {
	key := os.Getenv("REVENANT_BRIDGE")
	bridge := js.Global().Get(bridgesVar).Get(key)
	if key == "" || bridge.Type() != js.TypeObject {
		fmt.Fprintln(os.Stderr, "revenant: no bridge: start this program from durableobject/shim.js")
		os.Exit(2)
	}
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
	configs settings.Configs
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
	return &program{configs: configs}, nil
}

// parseSettings reads raw as config/ reads a file's "settings" section.
func parseSettings(raw string) (settings.Settings, error) {
	if strings.TrimSpace(raw) == "" {
		return settings.Settings{}, nil
	}
	c, err := config.Parse([]byte(`{"settings":` + raw + `}`))
	if err != nil {
		return settings.Settings{}, fmt.Errorf("%s: %w", SettingsVar, err)
	}
	return c.Settings, nil
}

// setup builds the turn driver: the offline model unless a provider is
// configured, with the tools that need no egress.
func (p *program) setup(clock core.Clock) (core.Config, core.Driver, error) {
	cfg := p.configs.Core
	if os.Getenv("OPENAI_BASE_URL") != "" || os.Getenv("REVENANT_MODEL") != "" {
		// Model egress goes through syumai/workers' fetch transport (issue
		// 13); until it is wired, refuse rather than run a different model.
		return cfg, nil, errors.New("OPENAI_BASE_URL / REVENANT_MODEL are set, but this build of the Durable Object host has no model egress yet: leave them empty for the offline model")
	}
	var delay time.Duration
	if s := os.Getenv("REVENANT_OFFLINE_WORD_DELAY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return cfg, nil, fmt.Errorf("REVENANT_OFFLINE_WORD_DELAY: %w", err)
		}
		delay = d
	}
	m := offline.New(clock, offline.Options{WordDelay: delay})
	registry, err := tool.NewRegistry(tool.KVGet(), tool.KVPut())
	if err != nil {
		return cfg, nil, err
	}
	driver, err := runner.New(m, registry, p.configs.Runner)
	return cfg, driver, err
}
