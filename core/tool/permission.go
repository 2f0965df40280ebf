package tool

import "github.com/revenantrt/revenant/core/permission"

// Permissioned is a tool that declares its own default decision: a webhook
// (its configured `permission`), a Func.
type Permissioned interface {
	Permission() string
}

// DefaultDecision is t's default permission decision (permission.Default):
// the one it declares, else its name's, an in-tree tool's (InTree) being
// its own. The runner decides calls by it, and a guest's host decides what
// a running call reaches by it.
func DefaultDecision(t Tool) permission.Decision {
	var declared permission.Decision
	if p, ok := t.(Permissioned); ok {
		declared = permission.Decision(p.Permission())
	}
	_, inTree := t.(InTree)
	return permission.Default(t.Spec().Name, inTree, declared)
}
