package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerdSpare runs objects with REVENANT_SPARE=on, the one path no
// other test takes (the benchmark measures it): each new object takes the
// spare Go program started after the previous one, and must take it for
// itself. Four trees created one after another each answer their own
// turn, and each log holds only its own prompt; a spare handed to two
// objects would refuse the second's boot (503) or mix their storage.
func TestWorkerdSpare(t *testing.T) {
	w := startWorkerdWith(t, "", "REVENANT_SPARE:on", "REVENANT_OFFLINE_WORD_DELAY:"+workerdWordDelay)
	s := w.client(t)
	for i := range 4 {
		sid := s.create()
		text := fmt.Sprintf("tree number %d", i)
		a := s.prompt(sid, text)
		sum := s.settle(sid, a)
		ta := sum.requireEnd(t, a, typeSucceeded, "")
		require.NotEmpty(t, ta.done)
		assert.Equal(t, "You said: "+text, ta.done[len(ta.done)-1].P.Text, "tree %d answers its own prompt", i)
		assert.Len(t, sum.order, 2, "tree %d holds its prompt and the probe only", i)
	}
}
