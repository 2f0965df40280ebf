package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A snapshot's prompts carry at most core.PromptTextPreview bytes of their
// text, and text_truncated when cut; its messages at most
// core.MessagePageBytes, whatever limit asks, and messages_before pages
// back through the rest.
func TestSnapshotIsBoundedInBytes(t *testing.T) {
	d := treetest.NewDriver(16)
	f := newFixtureWith(t, d, nil, api.NewConfig())
	alice := f.client(t, "")
	id := alice.create()
	for i := range 8 {
		text := strings.Repeat(strconv.Itoa(i), 200<<10)
		require.Equal(t, http.StatusAccepted, alice.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"`+text+`"}`, nil))
	}
	f.trees.tree(id).node.Idle()
	require.Equal(t, http.StatusAccepted, alice.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"hold"}`, nil))
	<-d.Started
	for range 8 {
		<-d.Started // the first eight's
	}
	big := strings.Repeat("q", 200<<10)
	require.Equal(t, http.StatusAccepted, alice.do("POST", "/v1/sessions/"+id+"/prompt", `{"text":"`+big+`"}`, nil))

	type snapshot struct {
		Prompts []struct {
			Text          string
			TextTruncated *bool `json:"text_truncated"`
		}
		Messages []struct {
			Seq  int64
			Text string
		}
		MessagesBefore *int64 `json:"messages_before"`
	}
	var snap snapshot
	require.Equal(t, http.StatusOK, alice.do("GET", "/v1/sessions/"+id+"?limit=500", "", &snap))
	require.Len(t, snap.Prompts, 2)
	assert.Equal(t, "hold", snap.Prompts[0].Text)
	assert.Nil(t, snap.Prompts[0].TextTruncated, "omitted when whole")
	assert.Equal(t, big[:core.PromptTextPreview], snap.Prompts[1].Text)
	require.NotNil(t, snap.Prompts[1].TextTruncated)
	assert.True(t, *snap.Prompts[1].TextTruncated)

	seen, last := 0, int64(api.MaxCursor)
	for {
		size := 0
		for _, m := range snap.Messages {
			size += len(m.Text)
		}
		assert.LessOrEqual(t, size, core.MessagePageBytes)
		seen += len(snap.Messages)
		if snap.MessagesBefore == nil {
			break
		}
		require.Less(t, *snap.MessagesBefore, last, "each page goes further back")
		last = *snap.MessagesBefore
		before := strconv.FormatInt(last, 10)
		snap = snapshot{}
		require.Equal(t, http.StatusOK, alice.do("GET", "/v1/sessions/"+id+"?limit=500&before="+before, "", &snap))
	}
	assert.Equal(t, 17, seen, "8 prompts and their answers, and the held one's user message")
	d.Release()
}
