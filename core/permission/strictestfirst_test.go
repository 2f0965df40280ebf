package permission_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/permission"
)

// When several resources of a call share the strictest decision, the
// first of them, in the call's order, names the verdict's resource and
// rule (the package doc's "the first such resource naming the rule"):
// the permission request and Permit's error name it, so which one they
// name must not depend on how many ties follow.
func TestDecideNamesTheFirstOfTheStrictest(t *testing.T) {
	p := permission.Policy{Config: []permission.Rule{
		rule("t", "a", permission.Allow),
		rule("t", "first", permission.Deny),
		rule("t", "second", permission.Deny),
	}}
	v := p.Decide("t", permission.Ask, []string{"a", "first", "second"})
	assert.Equal(t, permission.Deny, v.Decision)
	assert.Equal(t, "first", v.Resource)
	assert.Equal(t, "first", v.Rule.Resource)
	assert.ErrorContains(t, p.Permit("t", permission.Ask, "a", "first", "second"), "first is declined")

	// Two resources decided by the tool's default tie too.
	v = permission.Policy{}.Decide("t", permission.Ask, []string{"x", "y"})
	assert.Equal(t, "x", v.Resource)
}
