package permission

import "fmt"

// Policy is the rules that apply to one session's calls, by layer (see the
// package doc for the precedence). The zero Policy decides every call by
// the tool's default.
type Policy struct {
	// Config is REVENANT_CONFIG's `permissions`, in file order.
	Config []Rule
	// Session is the session's own `permissions`, from its config at
	// creation.
	Session []Rule
	// Saved is the tree's `always` rules, oldest first.
	Saved []Rule
}

// Verdict is the decision on one call and what decided it.
type Verdict struct {
	Decision Decision
	// Resource is the resource whose decision is the call's (the first of
	// the strictest); "" for a call with no resources.
	Resource string
	// Rule is the rule that decided Resource; for FromDefault it is the
	// tool's default written as a rule (Action the tool, Resource "*").
	Rule   Rule
	Source Source
}

// Decide decides a call of action touching resources, def being the tool's
// default (Default). Each resource is decided on its own and the strictest
// decision wins, the first such resource naming the rule.
func (p Policy) Decide(action string, def Decision, resources []string) Verdict {
	if len(resources) == 0 {
		resources = []string{""}
	}
	var out Verdict
	for i, res := range resources {
		v := p.decideOne(action, def, res)
		if i == 0 || v.Decision.strictness() > out.Decision.strictness() {
			out = v
		}
	}
	return out
}

// Permit decides the resources a running call of action reaches beyond
// those it declared (tool.Call.Permit): each must be allowed outright. A
// deny is refused, and so is an ask, since a running call cannot park to
// ask a person. The error names the resource and the rule, or the tool's
// default when no rule decided.
func (p Policy) Permit(action string, def Decision, resources ...string) error {
	v := p.Decide(action, def, resources)
	if v.Decision == Allow {
		return nil
	}
	by := v.DecidedBy()
	if v.Decision == Deny {
		return fmt.Errorf("%s is declined by %s", v.Resource, by)
	}
	return fmt.Errorf("%s would need approval by %s, which a running call cannot ask for", v.Resource, by)
}

// DecidedBy names what decided the verdict, for a message: a rule
// ("a permission rule (config \"*\": deny)"), or, with none, the tool's
// default ("the tool's default (deny)").
func (v Verdict) DecidedBy() string {
	if v.Source == FromDefault {
		return fmt.Sprintf("the tool's default (%s)", v.Decision)
	}
	return fmt.Sprintf("a permission rule (%s %q: %s)", v.Source, v.Rule.Resource, v.Decision)
}

// Pending lists the resources of a call that the policy still asks about
// (neither allowed nor denied), in order and without repeats: what an
// approval must cover.
func (p Policy) Pending(action string, def Decision, resources []string) []string {
	if len(resources) == 0 {
		resources = []string{""}
	}
	var out []string
	seen := map[string]bool{}
	for _, res := range resources {
		if !seen[res] && p.decideOne(action, def, res).Decision == Ask {
			out = append(out, res)
		}
		seen[res] = true
	}
	return out
}

func (p Policy) decideOne(action string, def Decision, resource string) Verdict {
	if !def.Valid() {
		def = Ask
	}
	base := Verdict{Decision: def, Resource: resource, Rule: Rule{Action: action, Resource: "*", Decision: def}, Source: FromDefault}
	if r, ok := last(p.Config, action, resource); ok {
		base = Verdict{Decision: r.Decision, Resource: resource, Rule: r, Source: FromConfig}
	}
	if base.Decision == Deny {
		return base // the operator's deny is final
	}
	over, ok := Verdict{}, false
	if r, found := last(p.Saved, action, resource); found {
		over, ok = Verdict{Decision: r.Decision, Resource: resource, Rule: r, Source: FromSaved}, true
	} else if r, found := last(p.Session, action, resource); found {
		over, ok = Verdict{Decision: r.Decision, Resource: resource, Rule: r, Source: FromSession}, true
	}
	if !ok || (base.final() && over.Decision.strictness() < base.Decision.strictness()) {
		return base // no overlay rule, or one that would lift a final rule
	}
	return over
}

// final reports whether the verdict is a final base-layer rule's.
func (v Verdict) final() bool { return v.Source == FromConfig && v.Rule.Final }

// FinalAsk reports whether the base layer asks about a call of action
// touching resource by a final rule, so that no overlay rule lifts the ask:
// an `always` reply to it approves that one call and must save no rule
// for resource.
func (p Policy) FinalAsk(action, resource string) bool {
	r, ok := last(p.Config, action, resource)
	return ok && r.Final && r.Decision == Ask
}

// last is the last rule of rules matching the call.
func last(rules []Rule, action, resource string) (Rule, bool) {
	for i := len(rules) - 1; i >= 0; i-- {
		if rules[i].Matches(action, resource) {
			return rules[i], true
		}
	}
	return Rule{}, false
}

// Default is a tool's default decision: declared if the tool declares a
// valid one (a webhook's configured `permission`), Allow for a tool whose
// whole effect stays in the tree (inTree: kv_get, kv_put) and for the
// built-in question, task and http_request tools (http_request's egress
// policy guards it; rules can make it ask), and Ask for any other tool.
func Default(name string, inTree bool, declared Decision) Decision {
	switch {
	case declared.Valid():
		return declared
	case inTree:
		return Allow
	}
	switch name {
	case "question", "task", "http_request":
		return Allow
	}
	return Ask
}

// AlwaysRules are the rules an `always` reply to a request about action
// saves: allow action on exactly each resource the request asked about
// (Exact rules, so a '*' in a resource such as a kv key covers nothing
// more), never a wider pattern.
func AlwaysRules(action string, resources []string) []Rule {
	out := make([]Rule, 0, len(resources))
	for _, res := range resources {
		out = append(out, Rule{Action: action, Resource: res, Decision: Allow, Exact: true})
	}
	return out
}
