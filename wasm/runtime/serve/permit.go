package serve

import (
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/tool"
)

// A guest's runner decides a call before it asks the host to run it, but
// what the call reaches as it runs (an http_request's redirect to another
// host) is only known here, where the real tool runs. The host puts it to
// the rules it holds: the operator's (Boot.Permissions, the same rules the
// guest boots with) under the tool's default, as core/runner's permit does
// in process. The session's own rules and its saved always rules are in
// the guest's database, which the host does not read: a resource those
// alone deny is not refused here, and one those alone allow while the
// operator's rules ask about it is refused.

// permit is the tool.Call.Permit the host gives a guest's call of tl.
func (t *Tree) permit(tl tool.Tool) func(...string) error {
	policy := permission.Policy{Config: t.cfg.Boot.Permissions}
	name, def := tl.Spec().Name, tool.DefaultDecision(tl)
	return func(resources ...string) error { return policy.Permit(name, def, resources...) }
}
