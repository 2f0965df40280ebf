package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/model"
	"github.com/revenantrt/revenant/core/runner"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// afterCommitDB runs hook after every transaction that committed, before
// the writer sees its result.
type afterCommitDB struct {
	storage.DB
	hook func()
}

func (d *afterCommitDB) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	err := d.DB.Tx(ctx, fn)
	if err == nil {
		d.hook()
	}
	return err
}

// An instance abandoned right after its step-start commit (the commit
// durable, the execution not yet at its model request) makes no model
// request: its context is cancelled, and a zombie's request is wasted money
// racing the next owner's request for the same step.
func TestAbandonedExecutionRequestsNoModelStep(t *testing.T) {
	tr := treetest.New(t)
	m := &scriptModel{steps: func(int) scriptStep { return scriptStep{chunks: []model.Chunk{chunkText("hi"), chunkStop()}} }}
	host, _, _ := tr.Host()
	var inst *core.Instance
	abandoned := false
	host.DB = &afterCommitDB{DB: host.DB, hook: func() {
		if abandoned || inst == nil {
			return
		}
		var steps int
		tr.Read(func(tx storage.Tx) error {
			_, err := storage.QueryRow(tx, `SELECT count(*) FROM steps`, nil, &steps)
			return err
		})
		if steps > 0 {
			abandoned = true
			inst.Abandon()
		}
	}}
	var err error
	inst, _, err = recovery.Boot(ctx, host, tr.Cfg, newRunner(t, m, runner.NewConfig()))
	require.NoError(t, err)
	t.Cleanup(inst.Abandon)
	_, err = inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "tester"})
	require.NoError(t, err)
	_, err = inst.Admit(ctx, "s", core.PromptInput{Text: "hello"})
	require.NoError(t, err)
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, inst.WaitIdle(wait))
	require.True(t, abandoned, "the step-start commit was reached")
	assert.Zero(t, m.Requests(1), "no model request from an abandoned execution")
}
