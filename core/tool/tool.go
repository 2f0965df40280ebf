package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/permission"
)

// Tool is one callable tool.
type Tool interface {
	// Spec is what the model is told: name, description, JSON schema.
	Spec() model.ToolSpec
	// Idempotent reports whether executing twice with the same key has the
	// effect of executing once.
	Idempotent() bool
	// Resources lists what a call with these arguments touches, for
	// permission checks before any side effect.
	Resources(args json.RawMessage) ([]string, error)
	// Limits are the call's wall-clock timeout and output cap; zero values
	// take the runner's defaults.
	Limits() Limits
	// Execute runs the call. The output is text for the model; an error is
	// reported to the model as the call's failed outcome.
	Execute(ctx context.Context, call Call) (string, error)
}

// Limits bound one call.
type Limits struct {
	Timeout   time.Duration
	OutputCap int // bytes
}

// Call is one execution of a tool call.
type Call struct {
	ID             string // minted by revenant
	Name           string
	Arguments      json.RawMessage
	IdempotencyKey string // stable across re-executions of the same call
	SessionID      string
	// Permit, when set, decides resources the call reaches as it runs
	// beyond those Resources declared (http_request's redirect to another
	// host) by the session's permission policy: nil when every one is
	// allowed outright, an error naming the resource and the rule when
	// one is denied or would need asking (a running call cannot stop to
	// ask). The runner sets it; nil checks nothing more.
	Permit func(resources ...string) error
	// SessionRules and SavedRules are the session's own permission rules
	// and the tree's saved always rules behind Permit, from the same
	// snapshot (the operator's rules are not here: every process that runs
	// tools has them from its configuration). Permit stays the check in
	// this process; these are for a proxy whose body runs in another
	// process (a wasm guest's tool, run by its host), so that process can
	// decide by the whole policy as Permit would. Read only: the runner
	// shares them with Permit.
	SessionRules, SavedRules []permission.Rule
}

// Registry is an immutable set of tools by name.
type Registry struct {
	byName map[string]Tool
}

// NewRegistry builds a registry; two tools with one name are an error.
func NewRegistry(tools ...Tool) (Registry, error) {
	r := Registry{byName: map[string]Tool{}}
	for _, t := range tools {
		name := t.Spec().Name
		if name == "" {
			return Registry{}, fmt.Errorf("tool registry: a tool has no name")
		}
		if _, dup := r.byName[name]; dup {
			return Registry{}, fmt.Errorf("tool registry: two tools named %q", name)
		}
		r.byName[name] = t
	}
	return r, nil
}

// Lookup finds a tool by name.
func (r Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Specs lists the tools' specs sorted by name, so requests are stable.
func (r Registry) Specs() []model.ToolSpec {
	out := make([]model.ToolSpec, 0, len(r.byName))
	for _, t := range r.byName {
		// Insertion by name: a handful of tools, and sort.Slice would
		// link the sort package's reflective sort into the wasm guest.
		s, i := t.Spec(), len(out)
		out = append(out, s)
		for ; i > 0 && out[i-1].Name > s.Name; i-- {
			out[i] = out[i-1]
		}
		out[i] = s
	}
	return out
}

// Func is a Tool built from a function, for embedders and tests.
type Func struct {
	Name, Description string
	Schema            json.RawMessage
	IsIdempotent      bool
	Limit             Limits
	// DefaultPermission is the tool's default permission decision,
	// "allow", "ask" or "deny" (core/permission); empty asks, as for any
	// tool that declares none. Rules may override it.
	DefaultPermission string
	Run               func(ctx context.Context, call Call) (string, error)
}

// Spec implements Tool.
func (f Func) Spec() model.ToolSpec {
	schema := f.Schema
	if schema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return model.ToolSpec{Name: f.Name, Description: f.Description, Schema: schema}
}

// Idempotent implements Tool.
func (f Func) Idempotent() bool { return f.IsIdempotent }

// Resources implements Tool: a Func touches only itself.
func (f Func) Resources(json.RawMessage) ([]string, error) { return []string{"tool:" + f.Name}, nil }

// Limits implements Tool.
func (f Func) Limits() Limits { return f.Limit }

// Permission is the tool's declared default decision (see the field).
func (f Func) Permission() string { return f.DefaultPermission }

// Execute implements Tool.
func (f Func) Execute(ctx context.Context, call Call) (string, error) { return f.Run(ctx, call) }
