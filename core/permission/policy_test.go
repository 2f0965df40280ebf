package permission_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/permission"
)

func rule(action, resource string, d permission.Decision) permission.Rule {
	return permission.Rule{Action: action, Resource: resource, Decision: d}
}

func TestDecideLastMatchWins(t *testing.T) {
	p := permission.Policy{Config: []permission.Rule{
		rule("http_request", "*", permission.Ask),
		rule("http_request", "http:*.example.com", permission.Allow),
		rule("http_request", "http:secret.example.com", permission.Ask),
	}}
	v := p.Decide("http_request", permission.Allow, []string{"http:api.example.com"})
	assert.Equal(t, permission.Allow, v.Decision)
	assert.Equal(t, p.Config[1], v.Rule)
	assert.Equal(t, permission.FromConfig, v.Source)

	v = p.Decide("http_request", permission.Allow, []string{"http:secret.example.com"})
	assert.Equal(t, permission.Ask, v.Decision)
	assert.Equal(t, p.Config[2], v.Rule)

	v = p.Decide("http_request", permission.Allow, []string{"http:other.net"})
	assert.Equal(t, permission.Ask, v.Decision)
	assert.Equal(t, p.Config[0], v.Rule)

	// No rule for the action: the tool's default decides.
	v = p.Decide("kv_put", permission.Allow, []string{"kv:a"})
	assert.Equal(t, permission.Verdict{Decision: permission.Allow, Resource: "kv:a",
		Rule: rule("kv_put", "*", permission.Allow), Source: permission.FromDefault}, v)
}

func TestDecideStrictestResourceWins(t *testing.T) {
	p := permission.Policy{Config: []permission.Rule{
		rule("t", "a", permission.Allow),
		rule("t", "b", permission.Ask),
		rule("t", "c", permission.Deny),
	}}
	assert.Equal(t, permission.Allow, p.Decide("t", permission.Ask, []string{"a", "a"}).Decision)
	v := p.Decide("t", permission.Ask, []string{"a", "b", "a"})
	assert.Equal(t, permission.Ask, v.Decision)
	assert.Equal(t, "b", v.Resource)
	v = p.Decide("t", permission.Allow, []string{"b", "c", "a"})
	assert.Equal(t, permission.Deny, v.Decision)
	assert.Equal(t, "c", v.Resource)
	// Unlisted resources take the default.
	assert.Equal(t, permission.Ask, p.Decide("t", permission.Ask, []string{"a", "z"}).Decision)
	assert.Equal(t, []string{"b", "z"}, p.Pending("t", permission.Ask, []string{"a", "b", "z", "b", "c"}))
}

func TestDecideNoResources(t *testing.T) {
	p := permission.Policy{Config: []permission.Rule{rule("t", "*", permission.Deny)}}
	v := p.Decide("t", permission.Allow, nil)
	assert.Equal(t, permission.Deny, v.Decision)
	assert.Equal(t, "", v.Resource)
	assert.Equal(t, permission.Ask, permission.Policy{}.Decide("t", permission.Ask, nil).Decision)
	assert.Equal(t, []string{""}, permission.Policy{}.Pending("t", permission.Ask, nil))
}

func TestDecideLayers(t *testing.T) {
	p := permission.Policy{
		Config: []permission.Rule{
			rule("http_request", "*", permission.Ask),
			rule("http_request", "http:evil.net", permission.Deny),
		},
		Session: []permission.Rule{
			rule("http_request", "http:*", permission.Allow),
			rule("http_request", "http:docs.example.com", permission.Ask),
		},
		Saved: permission.AlwaysRules("http_request", []string{"http:docs.example.com"}),
	}
	// The session allows what the operator asked about…
	v := p.Decide("http_request", permission.Allow, []string{"http:api.example.com"})
	assert.Equal(t, permission.Allow, v.Decision)
	assert.Equal(t, permission.FromSession, v.Source)
	// …a saved always rule wins over the session's ask…
	v = p.Decide("http_request", permission.Allow, []string{"http:docs.example.com"})
	assert.Equal(t, permission.Allow, v.Decision)
	assert.Equal(t, permission.FromSaved, v.Source)
	// …but neither lifts the operator's deny.
	p.Saved = append(p.Saved, rule("http_request", "*", permission.Allow))
	v = p.Decide("http_request", permission.Allow, []string{"http:evil.net"})
	assert.Equal(t, permission.Deny, v.Decision)
	assert.Equal(t, permission.FromConfig, v.Source)
	// A tool's default deny (a webhook configured "deny") is final too.
	v = p.Decide("deploy", permission.Deny, []string{"tool:deploy"})
	assert.Equal(t, permission.Deny, v.Decision)
	assert.Equal(t, permission.FromDefault, v.Source)
	// The session may tighten: deny what the operator allows.
	p = permission.Policy{Session: []permission.Rule{rule("kv_put", "kv:locked*", permission.Deny)}}
	assert.Equal(t, permission.Deny, p.Decide("kv_put", permission.Allow, []string{"kv:locked-1"}).Decision)
	assert.Equal(t, permission.Allow, p.Decide("kv_put", permission.Allow, []string{"kv:open"}).Decision)
}

func TestAlwaysRulesAreExact(t *testing.T) {
	rules := permission.AlwaysRules("kv_put", []string{"kv:*"})
	require.Len(t, rules, 1)
	p := permission.Policy{Saved: rules}
	assert.Equal(t, permission.Allow, p.Decide("kv_put", permission.Ask, []string{"kv:*"}).Decision)
	// The '*' of the approved key covers no other key.
	assert.Equal(t, permission.Ask, p.Decide("kv_put", permission.Ask, []string{"kv:other"}).Decision)
	// Nor another tool.
	assert.Equal(t, permission.Ask, p.Decide("kv_get", permission.Ask, []string{"kv:*"}).Decision)
}

// The probe's case: a session's allow-everything rule and an always rule
// lift a plain ask, but not a final one; the session may still deny.
func TestFinalAskIsNotLifted(t *testing.T) {
	ask := rule("deploy_staging", "*", permission.Ask)
	final := ask
	final.Final = true
	allowAll := []permission.Rule{rule("*", "*", permission.Allow)}
	saved := permission.AlwaysRules("deploy_staging", []string{""})

	plain := permission.Policy{Config: []permission.Rule{ask}, Session: allowAll}
	assert.Equal(t, permission.Allow, plain.Decide("deploy_staging", permission.Ask, nil).Decision, "a plain ask is liftable, as before")
	assert.False(t, plain.FinalAsk("deploy_staging", ""))
	plain = permission.Policy{Config: []permission.Rule{ask}, Saved: saved}
	assert.Equal(t, permission.Allow, plain.Decide("deploy_staging", permission.Ask, nil).Decision)

	for name, p := range map[string]permission.Policy{
		"session": {Config: []permission.Rule{final}, Session: allowAll},
		"saved":   {Config: []permission.Rule{final}, Saved: saved},
		"both":    {Config: []permission.Rule{final}, Session: allowAll, Saved: saved},
	} {
		v := p.Decide("deploy_staging", permission.Ask, nil)
		assert.Equal(t, permission.Ask, v.Decision, name)
		assert.Equal(t, permission.FromConfig, v.Source, name)
		assert.Equal(t, final, v.Rule, name)
		assert.Equal(t, []string{""}, p.Pending("deploy_staging", permission.Ask, nil), name)
		assert.True(t, p.FinalAsk("deploy_staging", ""), name)
		assert.Error(t, p.Permit("deploy_staging", permission.Ask, ""), name)
	}
	// The overlay may still tighten a final ask to a deny.
	p := permission.Policy{Config: []permission.Rule{final}, Session: []permission.Rule{rule("deploy_staging", "*", permission.Deny)}}
	v := p.Decide("deploy_staging", permission.Ask, nil)
	assert.Equal(t, permission.Deny, v.Decision)
	assert.Equal(t, permission.FromSession, v.Source)
	// A later operator rule decides the base layer as before: final marks
	// the rule that decided, not every rule of the action.
	p = permission.Policy{Config: []permission.Rule{final, rule("deploy_staging", "safe", permission.Allow)}, Session: allowAll}
	assert.Equal(t, permission.Allow, p.Decide("deploy_staging", permission.Ask, []string{"safe"}).Decision)
	assert.False(t, p.FinalAsk("deploy_staging", "safe"))
}

func TestDefault(t *testing.T) {
	assert.Equal(t, permission.Deny, permission.Default("deploy", false, permission.Deny))
	assert.Equal(t, permission.Allow, permission.Default("create_ticket", false, permission.Allow))
	assert.Equal(t, permission.Allow, permission.Default("kv_put", true, ""))
	assert.Equal(t, permission.Allow, permission.Default("http_request", false, ""))
	assert.Equal(t, permission.Allow, permission.Default("question", false, ""))
	assert.Equal(t, permission.Ask, permission.Default("embedder_tool", false, ""))
	assert.Equal(t, permission.Ask, permission.Default("embedder_tool", false, "bogus"))
	// An invalid default given to Decide fails closed to ask.
	assert.Equal(t, permission.Ask, permission.Policy{}.Decide("t", "bogus", []string{"x"}).Decision)
}

// FuzzDecide checks the precedence rules against a direct statement of
// them on random small rule sets.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, res uint8) {
		actions := []string{"t", "*", "u", "t*"}
		resources := []string{"*", "a", "b", "a*", "*b"}
		decisions := []permission.Decision{permission.Allow, permission.Ask, permission.Deny}
		var layers [3][]permission.Rule
		for i := 0; i+3 < len(data) && i < 60; i += 4 {
			r := permission.Rule{Action: actions[int(data[i])%len(actions)], Resource: resources[int(data[i+1])%len(resources)],
				Decision: decisions[int(data[i+2])%len(decisions)]}
			layer := int(data[i+3]) % 3
			// The high bit of the layer byte marks an operator's ask or deny final.
			r.Final = layer == 0 && r.Decision != permission.Allow && data[i+3]&0x80 != 0
			layers[layer] = append(layers[layer], r)
		}
		p := permission.Policy{Config: layers[0], Session: layers[1], Saved: layers[2]}
		resource := []string{"a", "b", "ab", "c"}[int(res)%4]
		def := decisions[int(res/4)%3]

		want, final := def, false
		if r, ok := lastMatch(p.Config, "t", resource); ok {
			want, final = r.Decision, r.Final
		}
		if want != permission.Deny {
			// A final ask may only be made stricter by the overlay.
			strictness := map[permission.Decision]int{permission.Allow: 0, permission.Ask: 1, permission.Deny: 2}
			if r, ok := lastMatch(append(append([]permission.Rule{}, p.Session...), p.Saved...), "t", resource); ok &&
				(!final || strictness[r.Decision] >= strictness[want]) {
				want = r.Decision
			}
		}
		if want == permission.Ask {
			require.Equal(t, final, p.FinalAsk("t", resource), "an ask is final exactly when a final rule decided it")
		}
		v := p.Decide("t", def, []string{resource})
		require.Equal(t, want, v.Decision)
		require.True(t, v.Source == permission.FromDefault || v.Rule.Matches("t", resource), "the deciding rule matches the call")
	})
}

func lastMatch(rules []permission.Rule, action, resource string) (permission.Rule, bool) {
	var out permission.Rule
	found := false
	for _, r := range rules {
		if r.Matches(action, resource) {
			out, found = r, true
		}
	}
	return out, found
}

// Permit's refusal names what decided: the rule that matched, or, when
// none did, the tool's default (not a rule "*" that nobody wrote).
func TestPermitNamesWhatDecided(t *testing.T) {
	var none permission.Policy
	assert.NoError(t, none.Permit("hook", permission.Allow, "x"))
	err := none.Permit("hook", permission.Deny, "x")
	require.Error(t, err)
	assert.Equal(t, `x is declined by the tool's default (deny)`, err.Error())
	err = none.Permit("hook", permission.Ask, "x")
	require.Error(t, err)
	assert.Equal(t, `x would need approval by the tool's default (ask), which a running call cannot ask for`, err.Error())

	ruled := permission.Policy{Config: []permission.Rule{rule("hook", "x", permission.Deny), rule("hook", "y", permission.Ask)}}
	err = ruled.Permit("hook", permission.Allow, "x")
	require.Error(t, err)
	assert.Equal(t, `x is declined by a permission rule (config "x": deny)`, err.Error())
	err = ruled.Permit("hook", permission.Allow, "y")
	require.Error(t, err)
	assert.Equal(t, `y would need approval by a permission rule (config "y": ask), which a running call cannot ask for`, err.Error())
}
