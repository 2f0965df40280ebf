package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/sqlitedb"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// failingConn fails every BEGIN while failing is set, as a transient
// storage fault would (IOERR).
type failingConn struct {
	*sqlitedb.Conn
	failing bool
}

func (c *failingConn) Begin() error {
	if c.failing {
		return &storage.Error{Code: 10, Msg: "disk I/O error"}
	}
	return c.Conn.Begin()
}

// A delivered wake-up is used up (DESIGN §4 rule 2). A wake handler whose
// sweep and re-arm fail on storage cannot tell that no work remains: it
// must leave the wake-up armed (or fail the call), or a host that deletes
// its delivered wake-up row strands the claim.
func TestWakeWhoseSweepFailsLeavesTheWakeupArmed(t *testing.T) {
	e := newEnv(t, 3, offlineConfig())
	fc := &failingConn{Conn: e.conn}
	g, err := compiled(t).Instantiate(context.Background(), runtime.Options{Conn: fc, Services: e.s})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(context.Background()) })
	e.g = g
	require.NoError(t, g.Boot(context.Background(), e.cfg))
	e.createAndPrompt("one two three four five six seven eight")
	require.NotNil(t, e.snapshot().Claim, "the turn holds a claim")

	fc.failing = true
	e.s.log.Reset()
	err = g.Wake(context.Background())
	armed := strings.Contains(e.s.log.String(), "wake_arm ")
	require.True(t, err != nil || armed,
		"the wake handler failed to sweep and re-arm, yet reported success without arming: the claim is left without a wake-up")
}
