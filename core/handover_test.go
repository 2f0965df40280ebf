package core_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/internal/treetest"
	"github.com/revenantrt/revenant/recovery"
)

// afterEachTx calls check right after every transaction of the wrapped
// database returns without error, in the goroutine that ran it and before
// that goroutine goes on: the state every committed transaction leaves is
// observed, however briefly it lasts.
type afterEachTx struct {
	storage.DB
	check func()
}

func (a *afterEachTx) Tx(ctx context.Context, fn func(storage.Tx) error) error {
	if err := a.DB.Tx(ctx, fn); err != nil {
		return err
	}
	a.check()
	return nil
}

// Between two queued turns the session is handed from one execution to the
// next without ever looking idle, so Close and idle eviction cannot slip in
// between (they would leave the started turn to be counted as a resume).
// After every transaction while turns remain, the session holds a claim
// (the terminal starts the next turn in its own transaction, DESIGN §6.3)
// and the instance is not idle.
func TestQueuedTurnsNeverLookIdleInBetween(t *testing.T) {
	tr := treetest.New(t)
	const turns = 10
	host, _, kill := tr.Host()
	inner := host.DB
	var (
		watching   atomic.Bool
		mu         sync.Mutex
		violations []string
		inst       *core.Instance
	)
	host.DB = &afterEachTx{DB: inner, check: func() {
		if !watching.Load() {
			return
		}
		var open int
		var claimed bool
		err := inner.Tx(context.Background(), func(tx storage.Tx) error {
			_, err := storage.QueryRow(tx, `SELECT (SELECT count(*) FROM prompts WHERE session_id = 's' AND state IN ('queued', 'running')),
				EXISTS (SELECT 1 FROM claims WHERE session_id = 's')`, nil, &open, &claimed)
			return err
		})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			violations = append(violations, fmt.Sprintf("read state: %v", err))
		}
		if open > 0 && !claimed {
			violations = append(violations, fmt.Sprintf("%d prompts to run and no claim", open))
		}
		if open > 0 && inst.Idle() {
			violations = append(violations, fmt.Sprintf("idle with %d prompts to run", open))
		}
	}}
	d := treetest.NewDriver(turns + 1)
	inst, _, err := recovery.Boot(context.Background(), host, tr.Cfg, d)
	require.NoError(t, err)
	t.Cleanup(func() { kill.Kill(); inst.Abandon() })

	_, err = inst.CreateSession(context.Background(), core.NewSession{ID: "s", Principal: "tester"})
	require.NoError(t, err)
	_, err = inst.Admit(context.Background(), "s", core.PromptInput{Text: "hold"})
	require.NoError(t, err)
	<-d.Started // registered: from here on the session is never idle until its last turn ends
	watching.Store(true)
	for i := range turns {
		_, err := inst.Admit(context.Background(), "s", core.PromptInput{Text: fmt.Sprint("quick ", i)})
		require.NoError(t, err)
	}
	d.Release()
	for range turns {
		<-d.Started
	}
	require.NoError(t, inst.WaitIdle(context.Background()))
	watching.Store(false)
	assert.Equal(t, turns+1, d.Runs())
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, violations)
}

// Queued prompts run in admission order (docs/api.md: a queue prompt joins
// the end of the queue): three admitted behind a running turn start one
// after another, oldest first, each once.
func TestQueuedPromptsRunInAdmissionOrder(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(8)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	want := []string{"first", "second", "third"}
	for _, text := range want {
		n.Admit(sid, text)
	}
	d.Release()
	var got []string
	for range want {
		got = append(got, (<-d.Started).Prompt())
	}
	n.Idle()
	assert.Equal(t, want, got, "the queue runs oldest first")
	assert.Equal(t, len(want)+1, d.Runs())
}
