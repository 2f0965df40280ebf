package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/digest"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/core/tool"
)

// Runner drives turns with one model and one set of tools.
type Runner struct {
	model model.Model
	tools tool.Registry
	cfg   Config
}

var (
	_ core.Driver        = (*Runner)(nil)
	_ core.OperatorRules = (*Runner)(nil)
)

// OperatorPermissions implements core.OperatorRules: the operator's rules
// (Config.WithPermissions), by which core judges the requests an `always`
// reply may approve with it.
func (r *Runner) OperatorPermissions() []permission.Rule { return r.cfg.permissions }

// New returns a runner, or an error for an invalid configuration.
func New(m model.Model, tools tool.Registry, cfg Config) (*Runner, error) {
	if m == nil {
		return nil, fmt.Errorf("new runner: no model")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new runner: %w", err)
	}
	return &Runner{model: m, tools: tools, cfg: cfg}, nil
}

var stopped = core.Outcome{Kind: core.Stopped}

// Run implements core.Driver: one loop iteration per durable move, each
// decided from what the database says now (a step that completed without
// tool calls ends the turn at once: step decides what reading it back
// would).
func (r *Runner) Run(ctx context.Context, x *core.Execution) core.Outcome {
	t := &turn{r: r, x: x}
	for {
		if ctx.Err() != nil {
			return stopped
		}
		st, err := t.load(ctx)
		if err != nil {
			x.Log().Warn("read turn state", "err", err)
			return stopped
		}
		last := st.last
		switch {
		case last != nil && last.state == core.StepStarted:
			// The execution that ran this step died mid-stream: keep what
			// was checkpointed and mark it cut (within the bound as stored:
			// a tree written before the bound may hold more). Not progress.
			cut := event.Cut{StepID: last.id, Text: core.StoredPrefix(last.text, core.MaxStoredText), Reason: event.CutInterrupted}
			if err := t.append(ctx, false, event.StepCut, cut); err != nil {
				return stopped
			}
		case last != nil && len(st.unsettled) > 0:
			if out, done := t.settleStep(ctx, st, last); done {
				return out
			}
		case last != nil && last.state == core.StepCompleted && !last.calledTools:
			return core.Outcome{Kind: core.Succeeded}
		case !r.cfg.allowsModel(st.model):
			// Checked before every model request, not only at creation: a
			// session stored before the operator narrowed the list must not
			// spend on a model that is no longer allowed.
			return core.Outcome{Kind: core.Failed, FailType: event.FailModelNotAllowed,
				Message: fmt.Sprintf("The session's model %q is not allowed on this server (allowed: %s); no model request was made.",
					core.Clip(st.model), strings.Join(r.cfg.allowedModels, ", "))}
		case st.steps >= r.cfg.stepCap:
			return core.Outcome{Kind: core.Failed, FailType: event.FailStepLimit,
				Message: fmt.Sprintf("The turn reached its limit of %d model steps.", r.cfg.stepCap)}
		default:
			if out, done := t.step(ctx, st, st.requests+1); done {
				return out
			}
		}
	}
}

// turn is one execution's view of its turn.
type turn struct {
	r *Runner
	x *core.Execution
}

func (t *turn) append(ctx context.Context, progress bool, typ event.Type, payload any) error {
	_, err := t.x.Append(ctx, progress, core.NewEvent{Type: typ, Payload: payload})
	return err
}

// state is what the database says about the turn.
type state struct {
	rootID string
	model  string    // the session's model; empty for the runner's
	tools  *[]string // the session's tool restriction, if any
	// The session's own permission rules and the tree's saved always rules
	// (the operator's are the runner's configuration).
	permissions, saved []permission.Rule
	retries            int // consecutive provider retries of the current step
	requests           int // model requests (step rows) started in this turn
	steps              int // steps of this turn: requests, less those retried after a provider failure
	last               *stepRow
	unsettled          []callRow // calls of the last step not yet settled, in order
}

// offered reports whether the session may call the named tool.
func (st state) offered(name string) bool {
	if st.tools == nil {
		return true
	}
	for _, n := range *st.tools {
		if n == name {
			return true
		}
	}
	return false
}

type stepRow struct {
	id, text    string
	state       core.StepState
	calledTools bool
}

type callRow struct {
	id, name, arguments, key string
	phase                    event.Phase
	index                    int
}

func (t *turn) load(ctx context.Context) (state, error) {
	var st state
	err := t.x.Read(ctx, func(tx storage.Tx) error {
		st = state{}
		var rawConfig string
		if _, err := storage.QueryRow(tx, `SELECT root_id, config FROM sessions WHERE id = ?`, []any{t.x.SessionID()}, &st.rootID, &rawConfig); err != nil {
			return err
		}
		cfg, err := core.ParseSessionConfig(json.RawMessage(rawConfig))
		if err != nil {
			return err
		}
		st.model, st.tools, st.permissions = cfg.Model, cfg.Tools, cfg.Permissions
		if st.saved, err = core.SavedRules(tx); err != nil {
			return err
		}
		// A request retried after a provider failure is the same step
		// (DESIGN §6.6, §12): only the cap leaves those out; step indexes
		// keep counting requests.
		var retried int
		if _, err := storage.QueryRow(tx, `SELECT retries, retried_steps, (SELECT count(*) FROM steps WHERE prompt_id = prompts.id) FROM prompts WHERE id = ?`,
			[]any{t.x.PromptID()}, &st.retries, &retried, &st.requests); err != nil {
			return err
		}
		st.steps = st.requests - retried
		var last stepRow
		var stepState string
		found, err := storage.QueryRow(tx, `SELECT id, state, text, EXISTS (SELECT 1 FROM tool_calls WHERE step_id = steps.id) FROM steps WHERE prompt_id = ? ORDER BY idx DESC LIMIT 1`,
			[]any{t.x.PromptID()}, &last.id, &stepState, &last.text, &last.calledTools)
		if err != nil || !found {
			return err
		}
		last.state = core.StepState(stepState)
		st.last = &last
		rows, err := tx.Query(`SELECT id, idx, name, arguments, phase, COALESCE(idempotency_key, '') FROM tool_calls WHERE step_id = ? AND phase != ? ORDER BY idx`,
			last.id, string(event.PhaseSettled))
		if err != nil {
			return err
		}
		for rows.Next() {
			var c callRow
			var phase string
			if err := rows.Scan(&c.id, &c.index, &c.name, &c.arguments, &phase, &c.key); err != nil {
				return err
			}
			c.phase = event.Phase(phase)
			st.unsettled = append(st.unsettled, c)
		}
		return nil
	})
	return st, err
}

// IdempotencyKey derives a call's key from tree, session, step and call
// index (DESIGN §2), so every re-execution of the call presents the same key.
func IdempotencyKey(rootID, sessionID, stepID string, index int) string {
	h := digest.New()
	for _, part := range []string{rootID, sessionID, stepID, strconv.Itoa(index)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "rvn_" + digest.Hex(h.Sum(nil))[:40]
}
