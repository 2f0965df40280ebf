package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/tool"
)

// A task call starts (or re-attaches to) its child session (core/job.go).
// In the background it settles at once with the child's id. In the
// foreground it is a durable waiting call (DESIGN §10): it parks on a task
// blocker with the step's other blockers, the child's turn terminal
// resolves it, and the continuation settles the call with the child's
// answer through the task@1 adapter (core/taskwait.go). Nothing waits for
// the child in memory, so a kill anywhere loses nothing.

// foregroundTask reports whether c is a foreground call of a task tool the
// session was offered, with its arguments. Arguments that cannot be read
// are the task body's to refuse, as a tool error.
func (t *turn) foregroundTask(st state, c callRow) (tool.TaskArgs, bool) {
	tl, known := t.r.tools.Lookup(c.name)
	sa, ok := tl.(tool.Subagent)
	if !known || !ok || !st.offered(c.name) {
		return tool.TaskArgs{}, false
	}
	args, err := sa.ParseTask([]byte(c.arguments))
	if err != nil || args.Background {
		return tool.TaskArgs{}, false
	}
	return args, true
}

// startForeground starts (or re-attaches to) a foreground call's child and
// returns the blocker the call parks on, with the given ordinal (0, or the
// next after the permission request that approved the call). A child that
// cannot be made (the depth limit, the tree's sub-agent limit) settles the
// call as a tool error instead: park is false. ok is false when the
// execution must stop.
func (t *turn) startForeground(ctx context.Context, c callRow, args tool.TaskArgs, ordinal int) (b event.Blocker, park, ok bool) {
	if ctx.Err() != nil {
		return b, false, false
	}
	child, err := t.x.StartChild(ctx, core.ChildSpec{CallID: c.id, Prompt: args.Prompt, MaxDepth: t.r.cfg.taskDepth, MaxChildren: t.r.cfg.maxSubagents})
	if err != nil {
		var ce *core.Error
		if errors.As(err, &ce) { // the model's mistake: a tool error
			return b, false, t.settled(ctx, event.Settled{CallID: c.id, Outcome: event.OutcomeError, Output: ce.Msg}) == nil
		}
		t.x.Log().Warn("start sub-agent", "call", c.id, "err", err)
		return b, false, false
	}
	b, err = core.TaskBlocker(c.id, ordinal, child)
	if err != nil {
		t.x.Log().Warn("park task call", "call", c.id, "err", err)
		return b, false, false
	}
	return b, true, true
}

// taskBody turns a background task call into a tool body bound to this
// execution: it starts (or re-attaches to) the call's child and returns at
// once. It runs through execute like any idempotent tool: executing is
// recorded first, so a resumed call re-runs it and re-attaches instead of
// spawning again.
func (t *turn) taskBody(sa tool.Subagent) tool.Tool {
	return tool.Func{Name: sa.Spec().Name, IsIdempotent: true, Limit: sa.Limits(), Run: func(ctx context.Context, c tool.Call) (string, error) {
		args, err := sa.ParseTask(c.Arguments)
		if err != nil {
			return "", err
		}
		child, err := t.x.StartChild(ctx, core.ChildSpec{CallID: c.ID, Prompt: args.Prompt, Background: args.Background, MaxDepth: t.r.cfg.taskDepth, MaxChildren: t.r.cfg.maxSubagents})
		if err != nil {
			var ce *core.Error
			if errors.As(err, &ce) {
				return "", errors.New(ce.Msg) // the model's mistake: a tool error
			}
			return "", err
		}
		return fmt.Sprintf("Started background sub-agent %s. Its answer will arrive as a new message when it finishes.", child.ID), nil
	}}
}
