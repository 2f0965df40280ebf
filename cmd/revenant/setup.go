package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/revenantrt/revenant/config"
	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/model/openai"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/webnet"
)

// setup is what the server runs turns with, built from the environment
// and REVENANT_CONFIG.
type setup struct {
	driver *runner.Runner
	// settings are REVENANT_CONFIG's, and configs them mapped: the
	// instance's and the API's configuration start from configs, and a
	// guest gets settings in its boot configuration.
	settings settings.Settings
	configs  settings.Configs
	defaults core.SessionConfig
	model    string // for the start-up log
	provider string // "offline" or the base URL
	tools    []string
	egress   string
	// The operator's permission rules, for a guest's boot configuration.
	rules []config.Rule
	// models are REVENANT_CONFIG's allowed_models (nil: any), for the API.
	models []string

	// What a guest needs (-guest): the host-side tools (the guest has its
	// own kv tools), the offline model's pace, or the provider.
	hostTools []tool.Tool
	wordDelay time.Duration
	baseURL   string
	apiKey    string
	modelName string
}

// listen gives the server's own listen address once it listens (the
// zero AddrPort before, or for a caller that serves nothing): the tools'
// egress refuses it even where allow_cidrs allows its address.
func buildSetup(getenv func(string) string, clock core.Clock, wordDelay time.Duration, listen func() netip.AddrPort, log *slog.Logger) (setup, error) {
	var conf config.Config
	if path := getenv(config.EnvVar); path != "" {
		var err error
		if conf, err = config.Load(path); err != nil {
			return setup{}, err
		}
	}
	configs, err := conf.Settings.Configs()
	if err != nil {
		return setup{}, fmt.Errorf("%s: settings: %w", config.EnvVar, err)
	}
	// The tools' requests are dialed from this process, each address
	// checked (webnet); in -guest mode these are the host's tools too.
	// A model must not call this server's own API, not even where the
	// operator let it reach loopback.
	policy := webnet.Dialing(conf.EgressPolicy().WithOwnListener(listen))
	webhooks, err := conf.Tools(policy)
	if err != nil {
		return setup{}, err
	}
	httpRequest := web.NewHTTPRequest(policy)
	all := append(append(tool.Defaults(), httpRequest), webhooks...)
	registry, err := tool.NewRegistry(all...)
	if err != nil {
		return setup{}, err
	}
	s := setup{settings: conf.Settings, configs: configs, egress: policy.String(), hostTools: append([]tool.Tool{httpRequest}, webhooks...), wordDelay: wordDelay,
		defaults: core.SessionConfig{
			SystemPrompt: conf.SessionDefaults.SystemPrompt, Model: conf.SessionDefaults.Model, Tools: conf.SessionDefaults.Tools}}
	for _, spec := range registry.Specs() {
		s.tools = append(s.tools, spec.Name)
	}
	// The default tools are the operator's, who knows the server's tools:
	// a name none has is a typo that would take that tool from every
	// session naming no tools of its own. (A client's config.tools may
	// name tools the server lacks: they are ignored there.)
	if names := conf.SessionDefaults.Tools; names != nil {
		for i, name := range *names {
			if _, ok := registry.Lookup(name); !ok {
				return setup{}, fmt.Errorf("%s: session_defaults.tools[%d]: the server has no tool named %q (its tools: %s)",
					config.EnvVar, i, name, strings.Join(s.tools, ", "))
			}
		}
	}

	var m model.Model
	key := getenv("OPENAI_API_KEY")
	provider, err := config.ChooseProvider(getenv("OPENAI_BASE_URL"), key, getenv("REVENANT_MODEL"), conf.SessionDefaults.Model)
	if err != nil {
		return setup{}, err
	}
	// The default model is checked here, where it is known: a session
	// naming none asks for it.
	if err := conf.CheckDefaultModel(provider.Model); err != nil {
		return setup{}, fmt.Errorf("%s: %w", config.EnvVar, err)
	}
	if provider.Offline() {
		m = offline.New(clock, offline.Options{WordDelay: wordDelay})
		s.provider, s.model = "offline", "offline (word delay "+wordDelay.String()+")"
	} else {
		base, name := provider.BaseURL, provider.Model
		// The provider's URL is the operator's, not the model's: it is not
		// subject to the tools' egress policy.
		m, err = openai.New(openai.Config{BaseURL: base, APIKey: key, Model: name, MaxRetryAfter: conf.Settings.MaxRetryAfter,
			Client: nethttp.Client(http.DefaultClient)})
		if err != nil {
			return setup{}, err
		}
		s.provider, s.model = base, name
		s.baseURL, s.apiKey, s.modelName = base, key, name
	}
	s.rules, s.models = conf.Permissions, conf.AllowedModels
	s.driver, err = runner.New(m, registry, configs.Runner.WithPermissions(conf.Permissions).WithAllowedModels(conf.AllowedModels))
	return s, err
}
