package core_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/internal/treetest"
)

// Between two queued turns the session is handed from one execution to the
// next without ever looking idle, so Close and idle eviction cannot slip in
// between (they would leave the started turn to be counted as a resume).
func TestQueuedTurnsNeverLookIdleInBetween(t *testing.T) {
	tr := treetest.New(t)
	const turns = 40
	d := treetest.NewDriver(turns + 1)
	n := tr.Boot(d)
	sid := n.NewSession("s")
	n.Admit(sid, "hold")
	<-d.Started
	for i := range turns {
		n.Admit(sid, fmt.Sprint("quick ", i))
	}
	var sawIdle atomic.Bool
	watching, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-watching:
				return
			default:
			}
			if n.Inst.Idle() && d.Runs() <= turns {
				sawIdle.Store(true)
			}
		}
	}()
	d.Release()
	for range turns {
		<-d.Started
	}
	n.Idle()
	close(watching)
	<-stopped
	assert.False(t, sawIdle.Load(), "the instance looked idle with turns still to run")
}
