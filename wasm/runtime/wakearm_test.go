package runtime_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/storage"
	"github.com/revenantrt/revenant/wasm/runtime"
)

// A wake-up the host cannot store because the tree's storage is closed
// (the tree was deleted under the request: host.storeWake) reaches the
// guest as "database closed", as the SQL imports answer on the deleted
// tree's closed connection: the prompt that armed is refused as cut short
// by the tree's stop (503, try again), never as an unknown failure (500).
// Nothing was admitted, and once the host stores wake-ups again the same
// prompt is admitted.
func TestPromptWhoseWakeArmFindsStorageClosed(t *testing.T) {
	e := newEnv(t, 5, offlineConfig())
	require.NoError(t, e.boot(runtime.Options{}))
	r := e.do("POST", "/v1/sessions", map[string]any{})
	require.Equal(t, 201, r.status, r.body.String())

	e.s.armErr = fmt.Errorf("arm wake-up of tree %s: tree not found: %w", treeID, storage.ErrClosed)
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "hi", "id": "p1"})
	require.True(t, r.ended)
	assert.Equal(t, 503, r.status, r.body.String())
	var body struct {
		Error struct{ Type string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body.Bytes(), &body), r.body.String())
	assert.Equal(t, "unavailable", body.Error.Type)
	assert.Empty(t, e.snapshot().Prompts, "nothing was admitted")

	e.s.armErr = nil
	r = e.do("POST", "/v1/sessions/"+treeID+"/prompt", map[string]any{"text": "hi", "id": "p1"})
	assert.Equal(t, 202, r.status, r.body.String())
}
