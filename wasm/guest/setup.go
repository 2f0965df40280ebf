//go:build wasip1

package main

import (
	"fmt"
	"log/slog"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
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
	gg := &guest{
		cfg:     cfg,
		clock:   &clock{timers: map[uint64]func(){}},
		es:      &egresses{byID: map[uint64]*egress{}},
		reqs:    requests{cancel: map[uint64]func(){}},
		watched: map[string]bool{},
	}
	gg.log = slog.New(logHandler{level: slog.LevelDebug}).With("tree", cfg.TreeID)
	gg.db = newDB(gg.onCommit)
	if cfg.HostMinor >= abi.MinorEgressEpoch {
		gg.es.epoch = func() int64 {
			if gg.inst == nil {
				return abi.NoEpoch
			}
			return gg.inst.Epoch()
		}
	}
	return gg, nil
}

// coreSetup builds the instance's configuration and the turn runner, as
// cmd/revenant's setup does for the local server.
func (gg *guest) coreSetup() (core.Config, core.Driver, error) {
	k := gg.cfg.Core
	cfg := core.NewConfig().WithCommitHook(gg.db.Hook)
	if k.ResumeBudget != nil {
		cfg = cfg.WithResumeBudget(*k.ResumeBudget)
	}
	if k.MaxClaimAge > 0 {
		cfg = cfg.WithMaxClaimAge(k.MaxClaimAge)
	}
	if k.WakeInterval > 0 {
		cfg = cfg.WithWakeInterval(k.WakeInterval)
	}
	if k.InterruptGrace > 0 {
		cfg = cfg.WithInterruptGrace(k.InterruptGrace)
	}

	var m model.Model
	switch mc := gg.cfg.Model; mc.Kind {
	case "", abi.ModelOffline:
		m = offline.New(gg.clock, offline.Options{WordDelay: mc.WordDelay})
	case abi.ModelOpenAI:
		// No key: the host adds it to every EgressModel request.
		om, err := openai.New(openai.Config{BaseURL: mc.BaseURL, Model: mc.Name, MaxRetryAfter: mc.MaxRetryAfter,
			Client: doer{es: gg.es, kind: abi.EgressModel}})
		if err != nil {
			return cfg, nil, err
		}
		m = om
	default:
		return cfg, nil, fmt.Errorf("unknown model kind %q", mc.Kind)
	}

	all := []tool.Tool{tool.KVGet(), tool.KVPut()}
	for _, d := range gg.cfg.Tools {
		t, err := newProxyTool(d, gg.es)
		if err != nil {
			return cfg, nil, err
		}
		all = append(all, t)
	}
	registry, err := tool.NewRegistry(all...)
	if err != nil {
		return cfg, nil, err
	}
	r := gg.cfg.Runner
	rc := runner.NewConfig()
	if r.StepCap > 0 {
		rc = rc.WithStepCap(r.StepCap)
	}
	if r.StreamIdle > 0 {
		rc = rc.WithStreamIdle(r.StreamIdle)
	}
	if r.StepWall > 0 {
		rc = rc.WithStepWall(r.StepWall)
	}
	if r.ToolTimeout > 0 {
		rc = rc.WithToolTimeout(r.ToolTimeout)
	}
	if r.OutputCap > 0 {
		rc = rc.WithOutputCap(r.OutputCap)
	}
	if r.CheckpointEvery > 0 || r.CheckpointBytes > 0 {
		every, size := r.CheckpointEvery, r.CheckpointBytes
		if every <= 0 {
			every = runner.DefaultCheckpointEvery
		}
		if size <= 0 {
			size = runner.DefaultCheckpointBytes
		}
		rc = rc.WithCheckpoints(every, size)
	}
	if r.Retries != nil || r.RetryInitial > 0 || r.RetryMax > 0 {
		n, initial, maxd := runner.DefaultRetries, runner.DefaultRetryInitial, runner.DefaultRetryMax
		if r.Retries != nil {
			n = *r.Retries
		}
		if r.RetryInitial > 0 {
			initial = r.RetryInitial
		}
		if r.RetryMax > 0 {
			maxd = r.RetryMax
		}
		rc = rc.WithRetries(n, initial, maxd)
	}
	if r.ContextBytes > 0 {
		rc = rc.WithContextBytes(r.ContextBytes)
	}
	if r.SystemPrompt != "" {
		rc = rc.WithSystemPrompt(r.SystemPrompt)
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
	cfg := api.NewConfig().WithSessionDefaults(core.SessionConfig{SystemPrompt: a.SystemPrompt, Model: a.ModelName, Tools: a.Tools})
	if a.Heartbeat > 0 {
		cfg = cfg.WithHeartbeat(a.Heartbeat)
	}
	if a.MaxBody > 0 {
		cfg = cfg.WithMaxBody(a.MaxBody)
	}
	return api.New(api.Deps{Trees: trees{gg}, Auth: auth, Clock: gg.clock, IDs: treeIDs{gg.cfg.TreeID}, Log: gg.log}, cfg)
}
