//go:build js && wasm

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/model/offline"
	"github.com/revenantrt/revenant/core/model/openai"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/durableobject"
)

// The provider variables mean what they mean on the local server
// (config.ChooseProvider): the key secret alone is OpenAI, never a quiet
// fall back to the offline model, and a model without a provider, or a
// provider without a model, fails the boot with the reason.
func TestTreeModelFollowsTheLocalRule(t *testing.T) {
	p := &program{}
	set := func(base, key, name string) {
		t.Setenv("OPENAI_BASE_URL", base)
		t.Setenv("OPENAI_API_KEY", key)
		t.Setenv("REVENANT_MODEL", name)
	}

	set("", "", "")
	m, err := p.model(nil)
	require.NoError(t, err)
	assert.IsType(t, &offline.Model{}, m, "nothing configured: the offline model")

	set("", "sk-test", "gpt-test")
	m, err = p.model(nil)
	require.NoError(t, err)
	assert.IsType(t, &openai.Model{}, m, "the key alone means OpenAI")

	set("", "sk-test", "")
	_, err = p.model(nil)
	assert.ErrorContains(t, err, "REVENANT_MODEL is required")

	set("", "", "gpt-test")
	_, err = p.model(nil)
	assert.ErrorContains(t, err, "no provider")

	set("http://127.0.0.1:9/v1", "", "m")
	m, err = p.model(nil)
	require.NoError(t, err)
	assert.IsType(t, &openai.Model{}, m)
}

// REVENANT_TOOLS' allowed_models reaches the object's API configuration
// (a create naming another model is refused there, by core/api), and
// REVENANT_MODEL must be one of them or the boot fails with the reason.
func TestTreeAllowedModels(t *testing.T) {
	t.Setenv(SettingsVar, "")
	t.Setenv(ToolsVar, `{"allowed_models":["gpt-4o-mini"]}`)
	p, err := load()
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o-mini"}, p.tools.AllowedModels)

	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("REVENANT_MODEL", "gpt-4o-mini")
	_, err = p.model(nil)
	require.NoError(t, err)
	t.Setenv("REVENANT_MODEL", "o1-pro-expensive")
	_, err = p.model(nil)
	assert.ErrorContains(t, err, `REVENANT_MODEL and REVENANT_TOOLS: the default model "o1-pro-expensive" is not in allowed_models (gpt-4o-mini)`)
}

// With no wake_interval in REVENANT_SETTINGS an object arms its alarm 1 s
// ahead, not the local server's 10 s (an alarm is cheap, and it is what
// resumes a turn whose object was evicted); a configured one wins.
func TestTreeWakeIntervalDefaultsToOneSecond(t *testing.T) {
	t.Setenv(ToolsVar, "")
	for raw, want := range map[string]time.Duration{"": time.Second, `{"wake_interval":"5s"}`: 5 * time.Second} {
		t.Setenv(SettingsVar, raw)
		p, err := load()
		require.NoError(t, err)
		expected, err := settings.Settings{WakeInterval: want}.Configs()
		require.NoError(t, err)
		assert.Equal(t, expected.Core, p.configs.Core, "settings %q", raw)
	}
}

// REVENANT_OFFLINE_WORD_DELAY paces the offline model (the e2e suite
// sets it); a bad or negative value fails the boot with the
// variable's name, as -offline-word-delay fails the local server's start.
func TestTreeOfflineWordDelay(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("REVENANT_MODEL", "")
	t.Setenv("REVENANT_OFFLINE_WORD_DELAY", "5ms")
	m, err := (&program{}).model(nil)
	require.NoError(t, err)
	assert.Equal(t, offline.New(nil, offline.Options{WordDelay: 5 * time.Millisecond}), m)

	for _, bad := range []string{"soon", "-5ms"} {
		t.Setenv("REVENANT_OFFLINE_WORD_DELAY", bad)
		_, err = (&program{}).model(nil)
		assert.ErrorContains(t, err, "REVENANT_OFFLINE_WORD_DELAY", bad)
	}
}

// REVENANT_SETTINGS' max_retry_after caps the provider's Retry-After on
// the object as on the local server: the provider is built with it.
func TestTreeProviderTakesMaxRetryAfter(t *testing.T) {
	t.Setenv(ToolsVar, "")
	t.Setenv(SettingsVar, `{"max_retry_after":"7s"}`)
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("REVENANT_MODEL", "m")
	p, err := load()
	require.NoError(t, err)
	m, err := p.model(nil)
	require.NoError(t, err)
	want, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:9/v1", Model: "m", Client: durableobject.Fetch{}, MaxRetryAfter: 7 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, want, m)
}

// REVENANT_SETTINGS is one JSON object. It is read as a config file's
// "settings" section, so text after the object must not read as more of
// that file: other sections there would be accepted and never used.
func TestParseSettingsIsOneObject(t *testing.T) {
	for _, raw := range []string{
		`{"max_body":5}, "egress": {"allow_cidrs":["10.0.0.0/8"]}`,
		`{"step_cap":3}, "allowed_models":["m"]`,
	} {
		_, err := parseSettings(raw)
		assert.ErrorContains(t, err, "REVENANT_SETTINGS: ", raw)
	}
	s, err := parseSettings(` {"step_cap":3} `)
	require.NoError(t, err)
	assert.Equal(t, 3, s.StepCap)
	_, err = parseSettings(`[]`)
	assert.ErrorContains(t, err, "REVENANT_SETTINGS: settings: must be an object")
	// A syntax error is placed in the var's own text, not in the file
	// text it is read as (12 columns further on).
	_, err = parseSettings(`{"step_cap":3,}`)
	assert.ErrorContains(t, err, "REVENANT_SETTINGS: invalid JSON at line 1, column 15: ")
	_, err = parseSettings(`{"max_body":5}, "egress":{}`)
	assert.ErrorContains(t, err, "REVENANT_SETTINGS: invalid JSON at line 1, column 15: invalid character ',' after top-level value")
	// So is a byte that is not UTF-8.
	_, err = parseSettings("{\"max_body\":\"\xff\"}")
	assert.ErrorContains(t, err, "REVENANT_SETTINGS: invalid UTF-8 at line 1, column 14: ")
	// And an escape of half a surrogate pair, read as U+FFFD otherwise.
	_, err = parseSettings(`{"max_body":"\udc00"}`)
	assert.ErrorContains(t, err, `REVENANT_SETTINGS: invalid escape at line 1, column 14: \udc00 is half a UTF-16 surrogate pair`)
}

// REVENANT_SETTINGS has the floors and bounds of a config file's settings.
func TestParseSettingsFloors(t *testing.T) {
	_, err := parseSettings(`{"stream_idle":"1ns","checkpoint_every":"1ns"}`)
	assert.ErrorContains(t, err, "REVENANT_SETTINGS: settings.stream_idle: 1ns is shorter than the least allowed, 1s")
	assert.ErrorContains(t, err, "settings.checkpoint_every: 1ns is shorter than the least allowed, 100ms")
	_, err = parseSettings(`{"queue_cap":1001}`)
	assert.ErrorContains(t, err, "REVENANT_SETTINGS: settings.queue_cap: 1001 is above the largest allowed, 1000")
}

// A REVENANT_OFFLINE_WORD_DELAY of zero is allowed, as the local server's
// -offline-word-delay 0 is ("0 or more"): the offline model answers with
// no delay between words, and the boot does not fail.
func TestTreeOfflineWordDelayOfZero(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("REVENANT_MODEL", "")
	for _, zero := range []string{"0", "0s"} {
		t.Setenv("REVENANT_OFFLINE_WORD_DELAY", zero)
		m, err := (&program{}).model(nil)
		require.NoError(t, err, "delay %q", zero)
		assert.Equal(t, offline.New(nil, offline.Options{}), m, "delay %q", zero)
	}
}

// A REVENANT_SETTINGS or REVENANT_TOOLS of white space only is no
// settings, as an unset var is (the defaults): a var left blank in
// wrangler.toml or the dashboard must not fail every boot.
func TestBlankVarsAreUnset(t *testing.T) {
	for _, blank := range []string{"", " ", "\t \n", "\r\n"} {
		s, err := parseSettings(blank)
		require.NoError(t, err, "settings %q", blank)
		assert.Equal(t, settings.Settings{}, s, "settings %q", blank)
		c, err := parseTools(blank, func(string) string { return "" })
		require.NoError(t, err, "tools %q", blank)
		assert.Empty(t, c.WebhookTools, "tools %q", blank)
	}
}
