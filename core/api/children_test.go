package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A parent's snapshot lists its sub-agents oldest first, each with the
// task call that made it, whether it runs in the background, its job and
// its own status and turns (docs/api.md, GET /v1/sessions/{id}); a child's
// own snapshot names its parent and root.
func TestSnapshotListsChildren(t *testing.T) {
	f := newFixture(t, offlineRunner(t), nil)
	c := f.client(t, "")
	id := c.create()
	for _, text := range []string{"/task --background hello from the background", "/task hello from the foreground"} {
		require.Equal(t, http.StatusAccepted, c.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"`+text+`"}`, nil))
		f.trees.tree(id).node.Idle()
	}

	var snap struct {
		Turns    int
		Children []struct {
			ID         string
			CallID     string `json:"call_id"`
			Background bool
			Job        string
			Status     string
			Turns      int
		}
		Messages []struct {
			ToolCalls json.RawMessage `json:"tool_calls"`
		}
	}
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id, "", &snap))
	var taskCalls []string
	for _, m := range snap.Messages {
		var calls []struct {
			CallID string `json:"call_id"`
			Name   string
		}
		if len(m.ToolCalls) > 0 {
			require.NoError(t, json.Unmarshal(m.ToolCalls, &calls))
		}
		for _, call := range calls {
			if call.Name == "task" {
				taskCalls = append(taskCalls, call.CallID)
			}
		}
	}
	require.Len(t, taskCalls, 2)
	require.Len(t, snap.Children, 2)
	for i, want := range []struct {
		id         string
		background bool
	}{{id + ".1", true}, {id + ".2", false}} {
		child := snap.Children[i]
		assert.Equal(t, want.id, child.ID)
		assert.Equal(t, taskCalls[i], child.CallID, "the task call that made it")
		assert.Equal(t, want.background, child.Background, child.ID)
		assert.Equal(t, "ended", child.Job)
		assert.Equal(t, "idle", child.Status)
		assert.Equal(t, 1, child.Turns)
	}

	var child struct {
		ID       string
		ParentID string `json:"parent_id"`
		RootID   string `json:"root_id"`
	}
	require.Equal(t, http.StatusOK, c.do("GET", "/v1/sessions/"+id+".2", "", &child))
	assert.Equal(t, id+".2", child.ID)
	assert.Equal(t, id, child.ParentID)
	assert.Equal(t, id, child.RootID)
}
