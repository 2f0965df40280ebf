package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/config"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/host"
	"github.com/revenantrt/revenant/wasm/abi"
)

// writeConfig writes a REVENANT_CONFIG file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// REVENANT_CONFIG's settings reach the in-process server's instance,
// runner and API configuration and, unchanged, a guest's boot
// configuration: the local server sets every knob the guest can.
func TestSettingsReachBothModes(t *testing.T) {
	path := writeConfig(t, `{"settings": {"resume_budget": 0, "step_cap": 3, "wake_interval": "2s", "heartbeat": "5s", "message_page_size": 20}}`)
	run, err := buildSetup(env(map[string]string{config.EnvVar: path}), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	want := settings.Settings{ResumeBudget: settings.None, StepCap: 3, WakeInterval: 2 * time.Second, Heartbeat: 5 * time.Second, MessagePageSize: 20}
	require.Equal(t, want, run.settings)
	configs, err := want.Configs()
	require.NoError(t, err)
	require.Equal(t, configs, run.configs)

	boot, err := guestBoot(run, "")
	require.NoError(t, err)
	require.Equal(t, want, boot.Settings)
}

// An invalid setting stops the server at start-up, naming the key.
func TestBadSettingRefusedAtStart(t *testing.T) {
	path := writeConfig(t, `{"settings": {"step_cap": 0, "stream_idel": "1m"}}`)
	err := serve(context.Background(), []string{"-data", t.TempDir()}, env(map[string]string{config.EnvVar: path}), io.Discard)
	require.Error(t, err)
	require.ErrorContains(t, err, "settings.step_cap: must be at least 1; leave the key out for the default")
	require.ErrorContains(t, err, "settings.stream_idel: unknown key (did you mean stream_idle?)")
}

// A session_defaults.tools name the server has no tool for stops the
// server at start, naming the entry: a typo there ("kv_gett") would
// otherwise take that tool from every session that names no tools of its
// own, silently. (A client's own config.tools may name tools the server
// lacks: a client cannot know them.) A webhook of the same file counts.
func TestUnknownDefaultToolRefusedAtStart(t *testing.T) {
	path := writeConfig(t, `{"session_defaults": {"tools": ["kv_get", "kv_gett"]}}`)
	_, err := buildSetup(env(map[string]string{config.EnvVar: path}), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	require.ErrorContains(t, err, `session_defaults.tools[1]: the server has no tool named "kv_gett"`)

	path = writeConfig(t, `{"webhook_tools": [{"name": "hook", "description": "d", "url": "https://hooks.example/x", "secret": "0123456789abcdef"}],
		"session_defaults": {"tools": ["hook", "http_request", "kv_get", "kv_put", "question", "task"]}}`)
	_, err = buildSetup(env(map[string]string{config.EnvVar: path}), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
}

// REVENANT_CONFIG's permission rules and each webhook's permission reach
// the in-process runner and, unchanged, a guest's boot configuration.
func TestPermissionsReachBothModes(t *testing.T) {
	path := writeConfig(t, `{"permissions": [{"action": "http_request", "resource": "*", "decision": "deny"}],
		"webhook_tools": [{"name": "deploy", "description": "d", "url": "https://example.com/h",
		"secret": "0123456789abcdef0123", "permission": "deny"}]}`)
	run, err := buildSetup(env(map[string]string{config.EnvVar: path}), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	boot, err := guestBoot(run, "")
	require.NoError(t, err)
	require.Equal(t, []config.Rule{{Action: "http_request", Resource: "*", Decision: config.Deny}}, boot.Permissions)
	perms := map[string]string{}
	for _, d := range boot.Tools {
		perms[d.Name] = d.Permission
	}
	require.Equal(t, map[string]string{"http_request": "", "deploy": "deny"}, perms)
}

// allowed_models: the provider's default model must be one (REVENANT_MODEL,
// else the session defaults'), and the list and a rule's final flag reach
// a guest's boot configuration as the in-process runner's and API's.
func TestAllowedModelsAndFinalRulesReachBothModes(t *testing.T) {
	path := writeConfig(t, `{"allowed_models": ["gpt-4o-mini", "gpt-4o"], "session_defaults": {"model": "gpt-4o-mini"}}`)
	provider := map[string]string{config.EnvVar: path, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
	run, err := buildSetup(env(provider), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, []string{"gpt-4o-mini", "gpt-4o"}, run.models)
	require.Equal(t, "gpt-4o-mini", run.modelName, "the session defaults' model, which is allowed")
	boot, err := guestBoot(run, "")
	require.NoError(t, err)
	require.Equal(t, []string{"gpt-4o-mini", "gpt-4o"}, boot.AllowedModels)

	provider["REVENANT_MODEL"] = "o1-pro-expensive"
	_, err = buildSetup(env(provider), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.EqualError(t, err, config.EnvVar+`: the default model "o1-pro-expensive" is not in allowed_models (gpt-4o-mini, gpt-4o)`)

	offline := writeConfig(t, `{"allowed_models": ["gpt-4o"]}`)
	_, err = buildSetup(env(map[string]string{config.EnvVar: offline}), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err, "the offline model names no model")

	final := writeConfig(t, `{"permissions": [{"action": "deploy", "resource": "*", "decision": "ask", "final": true}]}`)
	run, err = buildSetup(env(map[string]string{config.EnvVar: final}), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	boot, err = guestBoot(run, "")
	require.NoError(t, err)
	require.Equal(t, []config.Rule{{Action: "deploy", Resource: "*", Decision: config.Ask, Final: true}}, boot.Permissions)
	require.Nil(t, boot.AllowedModels, "no list: any model")
}

// A guest gets the API tokens as stand-ins, never the tokens: with none it
// would serve the anonymous principal to everyone.
func TestGuestBootCarriesTheTokensHashed(t *testing.T) {
	const token = "Zq8xW4vR-k2Jm9Pt"
	run, err := buildSetup(env(nil), host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	boot, err := guestBoot(run, "alice:"+token)
	require.NoError(t, err)
	require.NotEmpty(t, boot.API.Tokens)
	require.True(t, strings.HasPrefix(boot.API.Tokens, "alice:sha256:"), boot.API.Tokens)
	require.NotContains(t, boot.API.Tokens, token)

	boot, err = guestBoot(run, "")
	require.NoError(t, err)
	require.Empty(t, boot.API.Tokens, "no tokens: anonymous, as the in-process server")
}

// A guest's model and session defaults are the in-process server's: the
// offline model at its pace, or the provider's URL and model name, and
// REVENANT_CONFIG's session defaults for new sessions.
func TestGuestBootModelAndSessionDefaults(t *testing.T) {
	path := writeConfig(t, `{"session_defaults": {"system_prompt": "be brief", "model": "gpt-4o-mini", "tools": ["http_request"]}}`)
	run, err := buildSetup(env(map[string]string{config.EnvVar: path}), host.RealClock{}, 7*time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	boot, err := guestBoot(run, "")
	require.NoError(t, err)
	require.Equal(t, abi.ModelConfig{Kind: abi.ModelOffline, WordDelay: 7 * time.Millisecond}, boot.Model)
	require.Equal(t, "be brief", boot.API.SystemPrompt)
	require.Equal(t, "gpt-4o-mini", boot.API.ModelName)
	require.Equal(t, &[]string{"http_request"}, boot.API.Tools)

	run, err = buildSetup(env(map[string]string{config.EnvVar: path, "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "sk-secret"}),
		host.RealClock{}, time.Millisecond, noListener, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	boot, err = guestBoot(run, "")
	require.NoError(t, err)
	require.Equal(t, abi.ModelConfig{Kind: abi.ModelOpenAI, BaseURL: "http://127.0.0.1:1/v1", Name: "gpt-4o-mini"}, boot.Model, "the key stays with the host")
}

// noListener is a setup that serves nothing: no own address to refuse.
func noListener() netip.AddrPort { return netip.AddrPort{} }

// The server's own listen address reaches the tools' egress: with
// loopback allowed (allow_cidrs 127.0.0.1/32), http_request, which a
// guest runs through the host's tools too, still cannot call this
// server's API, while another server on loopback stays reachable.
func TestHTTPRequestRefusesTheServersOwnAPI(t *testing.T) {
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("http_request reached the server's own API: %s", r.URL)
	}))
	defer own.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	ownAP := own.Listener.Addr().(*net.TCPAddr).AddrPort()
	otherAP := other.Listener.Addr().(*net.TCPAddr).AddrPort()
	path := writeConfig(t, fmt.Sprintf(`{"egress": {"allow_cidrs": ["127.0.0.1/32"], "ports": [%d, %d]}}`, ownAP.Port(), otherAP.Port()))
	run, err := buildSetup(env(map[string]string{config.EnvVar: path}), host.RealClock{}, time.Millisecond,
		func() netip.AddrPort { return ownAP }, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	var httpRequest tool.Tool
	for _, tl := range run.hostTools {
		if tl.Spec().Name == "http_request" {
			httpRequest = tl
		}
	}
	require.NotNil(t, httpRequest)
	call := func(target netip.AddrPort) error {
		_, err := httpRequest.Execute(context.Background(), tool.Call{ID: "c", Name: "http_request", IdempotencyKey: "k", SessionID: "s",
			Arguments: json.RawMessage(`{"url": "http://` + target.String() + `/v1/sessions"}`)})
		return err
	}
	require.NoError(t, call(otherAP), "loopback is allowed")
	err = call(ownAP)
	require.Error(t, err)
	require.ErrorContains(t, err, ownAP.String()+" is this server's own API")
}
