package serve

import (
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/wasm/abi"
)

// A guest's runner decides a call before it asks the host to run it, but
// what the call reaches as it runs (an http_request's redirect to another
// host) is only known here, where the real tool runs. The host decides it
// by the session's whole policy, as core/runner's permit does in process:
// the operator's rules (Boot.Permissions, the same rules the guest boots
// with) and the tool's default, with the session's own rules and the
// tree's saved always rules that the guest sends with the call (ABI 1.5;
// they live in the guest's database). permission.Policy keeps the
// operator's deny final. A call from a guest older than 1.5 carries no
// rules and is decided by the operator's alone.

// permit is the tool.Call.Permit the host gives a guest's call of tl.
func (t *Tree) permit(tl tool.Tool, call abi.ToolCall) func(...string) error {
	policy := permission.Policy{Config: t.cfg.Boot.Permissions, Session: call.SessionRules, Saved: call.SavedRules}
	name, def := tl.Spec().Name, tool.DefaultDecision(tl)
	return func(resources ...string) error { return policy.Permit(name, def, resources...) }
}
