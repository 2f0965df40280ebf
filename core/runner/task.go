package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/tool"
)

// taskBody turns a task call into a tool body bound to this execution: it
// starts (or re-attaches to) the call's child and, in the foreground, waits
// for the child's task turn to end and returns its answer. It runs through
// execute like any idempotent tool: executing is recorded first, so a
// resumed call re-runs it and re-attaches instead of spawning again.
func (t *turn) taskBody(sa tool.Subagent) tool.Tool {
	return tool.Func{Name: sa.Spec().Name, IsIdempotent: true, Limit: sa.Limits(), Run: func(ctx context.Context, c tool.Call) (string, error) {
		args, err := sa.ParseTask(c.Arguments)
		if err != nil {
			return "", err
		}
		child, err := t.x.StartChild(ctx, core.ChildSpec{CallID: c.ID, Prompt: args.Prompt, Background: args.Background, MaxDepth: t.r.cfg.taskDepth})
		if err != nil {
			var ce *core.Error
			if errors.As(err, &ce) {
				return "", errors.New(ce.Msg) // the model's mistake: a tool error
			}
			return "", err
		}
		if args.Background {
			return fmt.Sprintf("Started background sub-agent %s. Its answer will arrive as a new message when it finishes.", child.ID), nil
		}
		res, err := t.x.AwaitChild(ctx, child)
		if err != nil {
			t.stopChild(ctx, child)
			return "", err
		}
		if res.State != core.PromptSucceeded {
			return "", fmt.Errorf("sub-agent %s: %s", child.ID, res.Text)
		}
		return res.Text, nil
	}}
}

// stopChild interrupts a foreground child whose parent's turn is being
// interrupted (DESIGN §10). A stop for any other reason (shutdown, a kill,
// the wall limit) leaves the child: a shutdown keeps its claim for the next
// boot, where the re-run call re-attaches.
func (t *turn) stopChild(ctx context.Context, child core.Child) {
	cause := context.Cause(ctx)
	if !errors.Is(cause, core.ErrInterrupted) && !errors.Is(cause, core.ErrSuperseded) {
		return
	}
	if _, err := t.x.InterruptChild(context.WithoutCancel(ctx), child.ID); err != nil {
		t.x.Log().Warn("interrupt foreground child", "child", child.ID, "err", err)
	}
}
