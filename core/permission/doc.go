// Package permission decides whether a tool call may run: rules map an
// action (the tool's name) and a resource (what the call touches, from
// tool.Tool.Resources) to allow, ask or deny (DESIGN §9).
//
// # Patterns
//
// A rule's action and resource are glob patterns. '*' matches any run of
// characters, the empty run included, and crosses ':', '/' and '.' alike;
// every other character, '?' and '\' included, matches only itself, and
// matching is case-sensitive (tools lowercase the hosts they report). So
// "http:*.example.com" matches "http:api.example.com" but not
// "http:example.com", and "*" matches everything. An action pattern is a
// tool name with '*' wildcards (letters, digits, '_', '-', '*').
//
// # Precedence
//
// Rules come in two layers. The base layer is the operator's: each tool's
// default decision, then REVENANT_CONFIG's `permissions` in file order. The
// overlay is the tree's: the session's own `permissions` (given at
// creation), then the rules saved by `always` replies in the order they
// were saved. Within a layer the last matching rule wins. A base-layer deny
// is final: neither a session's rules nor an `always` reply can lift what
// the operator denied. So is a base-layer ask decided by a rule marked
// final (`"final": true`, an operator's rule only): an overlay rule may
// make such a call a deny, never an allow, and an `always` reply to it
// approves that one call and saves no rule. Otherwise a matching overlay
// rule wins over the base layer. A tool's own default ask is not final;
// the operator makes it so with a final rule for the tool.
//
// A call touching several resources is decided resource by resource, and
// the strictest decision wins (deny over ask over allow); the Verdict names
// the resource and rule behind it. A call that declares no resources is
// decided as if it touched the one empty resource "", so action-wide rules
// ("*") still apply.
//
// Defaults: a tool's own decision where it declares one (a webhook's
// configured `permission`), allow for tools whose whole effect stays in the
// tree (kv_get, kv_put, question, task) and for http_request (its egress
// policy guards it; add rules to ask), and ask for any other tool.
//
// What a call reaches only as it runs (an http_request redirect to another
// host) is put to Policy.Permit, which has no one to ask: only an allow
// lets it through.
//
// The package is a leaf: it imports nothing of revenant.
package permission
