package core_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/treetest"
)

// An event page holds at most limit events and no more data than its
// budget, one event at least; more says whether the log goes on.
func TestEventPagesAreBoundedInBytes(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(32))
	id := n.NewSession("s")
	for _, c := range "abcd" {
		n.Admit(id, strings.Repeat(string(c), 10<<10))
	}
	for i := range 20 { // and a log longer than a hundred events
		n.Admit(id, "short "+strconv.Itoa(i))
	}
	n.Idle()
	all := tr.Events(id)
	require.Greater(t, len(all), 100)
	for _, c := range []struct{ limit, budget int }{{500, 1 << 30}, {500, 1}, {500, 15 << 10}, {500, 40 << 10}, {3, 1 << 30}, {2, 15 << 10}} {
		var got []int64
		after := int64(0)
		for {
			page, more, err := n.Inst.EventPage(ctx, id, after, c.limit, c.budget)
			require.NoError(t, err)
			require.NotEmpty(t, page, "%+v", c)
			assert.LessOrEqual(t, len(page), c.limit, "%+v", c)
			size := 0
			for _, ev := range page {
				size += len(ev.Data)
				got = append(got, ev.Seq)
			}
			if len(page) > 1 {
				assert.LessOrEqual(t, size, c.budget, "%+v", c)
			}
			after = page[len(page)-1].Seq
			if !more {
				break
			}
		}
		var want []int64
		for _, ev := range all {
			want = append(want, ev.Seq)
		}
		assert.Equal(t, want, got, "%+v: every event once, in order", c)
	}
	page, more, err := n.Inst.EventPage(ctx, id, all[len(all)-1].Seq, 500, 1<<20)
	require.NoError(t, err)
	assert.Empty(t, page)
	assert.False(t, more)
}
