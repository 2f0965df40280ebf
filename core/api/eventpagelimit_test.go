package api_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/internal/treetest"
)

// A page that fills to its limit past the first window of sizes read
// (readEventPage reads 4, then 16, …) still says whether the log goes on,
// and paging on from it reads every event once: the catch-up of an event
// stream pages this way. The core's own test pages with limits of 2, 3 and
// 500, which the first window covers or the log ends before.
func TestEventPagesFullPastTheFirstWindowSayTheLogGoesOn(t *testing.T) {
	tr := treetest.New(t)
	n := tr.Boot(treetest.NewDriver(32))
	id := n.NewSession("s")
	for i := range 15 {
		n.Admit(id, "short "+strconv.Itoa(i))
	}
	n.Idle()
	all := tr.Events(id)
	require.Greater(t, len(all), 40)
	var want []int64
	for _, ev := range all {
		want = append(want, ev.Seq)
	}
	for _, limit := range []int{5, 10, 20, 21} {
		var got []int64
		after := int64(0)
		for pages := 0; ; pages++ {
			require.Less(t, pages, len(all), "limit %d: paging never ends", limit)
			page, more, err := n.Inst.EventPage(context.Background(), id, after, limit, 1<<20)
			require.NoError(t, err)
			require.NotEmpty(t, page, "limit %d", limit)
			require.LessOrEqual(t, len(page), limit)
			if more {
				assert.Len(t, page, limit, "limit %d: a page cut by its limit is full", limit)
			}
			for _, ev := range page {
				got = append(got, ev.Seq)
			}
			after = page[len(page)-1].Seq
			if !more {
				break
			}
		}
		assert.Equal(t, want, got, "limit %d: every event once, in order", limit)
	}
}
