package core_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A snapshot's prompts carry their text cut to core.PromptTextPreview
// bytes, at a character boundary, and say so: a session with many large
// queued prompts has a small snapshot.
func TestSnapshotCutsPromptText(t *testing.T) {
	tr := treetest.New(t)
	d := treetest.NewDriver(1)
	n := tr.Boot(d)
	id := n.NewSession("s")
	n.Admit(id, "hold")
	<-d.Started // the rest stay queued
	const preview = core.PromptTextPreview
	big := strings.Repeat("a", 200<<10)
	exact := strings.Repeat("b", preview)
	accent := strings.Repeat("c", preview-1) + "é" // preview+1 bytes, preview characters
	wide := strings.Repeat("€", preview)           // 3 bytes a character
	for _, text := range []string{big, exact, accent, wide} {
		n.Admit(id, text)
	}
	snap, err := n.Inst.Snapshot(ctx, id, 0, 50)
	require.NoError(t, err)
	require.Len(t, snap.Prompts, 5)
	type cut struct {
		text      string
		truncated bool
	}
	var got []cut
	for _, p := range snap.Prompts[1:] {
		assert.True(t, utf8.ValidString(p.Text))
		got = append(got, cut{p.Text, p.Truncated})
	}
	assert.Equal(t, []cut{
		{big[:preview], true},
		{exact, false},
		{accent[:preview-1], true},
		{wide[:preview/3*3], true},
	}, got)
	assert.Equal(t, cut{"hold", false}, cut{snap.Prompts[0].Text, snap.Prompts[0].Truncated})
	d.Release()
}

// A page of messages holds no more than its byte budget, one message at
// least, and paging back with the first message's seq reads every message
// once, in order.
func TestMessagePagesAreBoundedInBytes(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(8))
	id := n.NewSession("s")
	for _, c := range "abcd" {
		n.Admit(id, strings.Repeat(string(c), 1000)) // a user message and its echo, 1000 and 1006 bytes
	}
	n.Idle()
	all, more, err := n.Inst.MessagePage(ctx, id, 0, 500, 1<<30)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, all, 8)

	for _, c := range []struct {
		budget int
		pages  []int // messages a page, newest page first
	}{
		{1 << 30, []int{8}},
		{2006, []int{2, 2, 2, 2}}, // exactly an answer and its prompt
		{2005, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{1, []int{1, 1, 1, 1, 1, 1, 1, 1}}, // one message whatever its size
		{3500, []int{3, 3, 2}},
	} {
		var got []core.Message
		var pages []int
		before := int64(0)
		for {
			page, more, err := n.Inst.MessagePage(ctx, id, before, 500, c.budget)
			require.NoError(t, err)
			require.NotEmpty(t, page)
			size := 0
			for _, m := range page {
				size += len(m.Text) + len(m.ToolCalls)
			}
			if len(page) > 1 {
				assert.LessOrEqual(t, size, c.budget, "budget %d", c.budget)
			}
			pages = append(pages, len(page))
			got = append(page, got...)
			if !more {
				break
			}
			before = page[0].Seq
		}
		assert.Equal(t, c.pages, pages, "budget %d", c.budget)
		assert.Equal(t, all, got, "budget %d: every message once, in order", c.budget)
	}
	page, more, err := n.Inst.MessagePage(ctx, id, 0, 3, 1<<30)
	require.NoError(t, err)
	assert.True(t, more, "the limit still pages")
	assert.Equal(t, all[5:], page)
}

// The snapshot's page of messages is bounded by core.MessagePageBytes, and
// paging back reads the rest.
func TestSnapshotMessagesAreBoundedInBytes(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(8))
	id := n.NewSession("s")
	const size = 200 << 10
	for _, c := range "abcd" {
		n.Admit(id, strings.Repeat(string(c), size)) // 8 messages of 200 KiB: 1.6 MB
	}
	n.Idle()
	seen := 0
	before := int64(0)
	for {
		snap, err := n.Inst.Snapshot(ctx, id, before, 500)
		require.NoError(t, err)
		bytes := 0
		for _, m := range snap.Messages {
			bytes += len(m.Text)
		}
		assert.LessOrEqual(t, bytes, core.MessagePageBytes)
		seen += len(snap.Messages)
		if !snap.MoreBefore {
			break
		}
		before = snap.Messages[0].Seq
	}
	assert.Equal(t, 8, seen)
}

// A message's tool_calls count toward its page's budget as its text does:
// an assistant answer that is a large tool call and no text does not ride
// along on a page that has no room for it.
func TestMessagePagesCountToolCalls(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(offlineTaskRunner(t, tr))
	id := n.NewSession("s")
	n.Admit(id, `/tool nosuch {"pad":"`+strings.Repeat("x", 3000)+`"}`)
	n.Idle()
	all, more, err := n.Inst.MessagePage(ctx, id, 0, 500, 1<<30)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, all, 4, "the prompt, the tool call, its result, the answer")
	require.Empty(t, all[1].Text)
	require.Greater(t, len(all[1].ToolCalls), 3000)

	const budget = 1000
	var pages [][]core.Message
	for before := int64(0); ; {
		page, more, err := n.Inst.MessagePage(ctx, id, before, 500, budget)
		require.NoError(t, err)
		pages = append([][]core.Message{page}, pages...)
		if !more {
			break
		}
		before = page[0].Seq
	}
	var got []core.Message
	for _, page := range pages {
		got = append(got, page...)
		size := 0
		for _, m := range page {
			size += len(m.Text) + len(m.ToolCalls)
		}
		if len(page) > 1 {
			assert.LessOrEqual(t, size, budget, "a page of %d messages", len(page))
		}
	}
	assert.Len(t, pages, 3, "the prompt alone, the tool call alone, the result with the answer")
	assert.Equal(t, all, got, "every message once, in order")
}
