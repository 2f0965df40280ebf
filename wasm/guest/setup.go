//go:build wasip1

package main

import (
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/logs"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/model/openai"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/wasm/abi"
)

func newGuest(cfg abi.BootConfig) (*guest, error) {
	if cfg.TreeID == "" {
		return nil, fmt.Errorf("no tree id")
	}
	configs, err := cfg.Settings.Configs()
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	gg := &guest{
		cfg:     cfg,
		configs: configs,
		clock:   &clock{timers: map[uint64]func(){}},
		es:      &egresses{byID: map[uint64]*egress{}},
		reqs:    requests{cancel: map[uint64]func(){}},
		watched: map[string]bool{},
	}
	// No tree attribute: the host logs every line under its tree's name.
	gg.log = logs.New(logHandler{level: logs.LevelDebug})
	gg.db = newDB(gg.onCommit)
	if cfg.HostMinor >= abi.MinorEgressEpoch {
		gg.es.epoch = func() int64 {
			if gg.inst == nil {
				return abi.NoEpoch
			}
			return gg.inst.Epoch()
		}
	}
	gg.es.onFenced = func(id uint64, msg string) {
		// The host's epoch fence refused a request: a newer instance owns
		// the tree. The request fails with core.ErrFenced, and this
		// instance's next write fails on the epoch, which ends its
		// execution.
		gg.log.Warn("egress fenced: this instance is superseded", "egress", id, "reason", msg)
	}
	return gg, nil
}

// coreSetup builds the instance's configuration and the turn runner from
// the boot configuration's settings, mapped as every host maps them
// (settings.Configs).
func (gg *guest) coreSetup() (core.Config, core.Driver, error) {
	cfg := gg.configs.Core.WithCommitHook(gg.db.Hook)

	var m model.Model
	switch mc := gg.cfg.Model; mc.Kind {
	case "", abi.ModelOffline:
		m = offline.New(gg.clock, offline.Options{WordDelay: mc.WordDelay})
	case abi.ModelOpenAI:
		// No key: the host adds it to every EgressModel request.
		om, err := openai.New(openai.Config{BaseURL: mc.BaseURL, Model: mc.Name, MaxRetryAfter: gg.cfg.Settings.MaxRetryAfter,
			Client: doer{es: gg.es, kind: abi.EgressModel}})
		if err != nil {
			return cfg, nil, err
		}
		m = om
	default:
		return cfg, nil, fmt.Errorf("unknown model kind %q", mc.Kind)
	}

	all := tool.Defaults()
	for _, d := range gg.cfg.Tools {
		t, err := newProxyTool(d, gg.es, gg.cfg.HostMinor)
		if err != nil {
			return cfg, nil, err
		}
		all = append(all, t)
	}
	registry, err := tool.NewRegistry(all...)
	if err != nil {
		return cfg, nil, err
	}
	rc := gg.configs.Runner.WithPermissions(gg.cfg.Permissions).WithAllowedModels(gg.cfg.AllowedModels)
	if gg.cfg.SystemPrompt != "" {
		rc = rc.WithSystemPrompt(gg.cfg.SystemPrompt)
	}
	driver, err := runner.New(m, registry, rc)
	if err != nil {
		return cfg, nil, err
	}
	return cfg, driver, nil
}

// apiSetup builds the API handler over the guest's one tree.
func (gg *guest) apiSetup() (*api.Handler, error) {
	a := gg.cfg.API
	var auth api.Authenticator = api.Anonymous{}
	if a.Tokens != "" {
		t, err := api.ParseTokens(a.Tokens)
		if err != nil {
			return nil, err
		}
		auth = t
	}
	cfg := gg.configs.API.WithSessionDefaults(core.SessionConfig{SystemPrompt: a.SystemPrompt, Model: a.ModelName, Tools: a.Tools}).
		WithAllowedModels(gg.cfg.AllowedModels)
	tr := newTrees(gg)
	return api.New(api.Deps{Trees: tr, Auth: auth, Clock: gg.clock, IDs: tr, Log: gg.log}, cfg)
}
