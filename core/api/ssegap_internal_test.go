package api

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/httpmsg"
	"github.com/revenantrt/revenant/core/httpmsg/nethttp"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A live event one past a missing one (seq last+2) makes the stream catch
// up from the log: the missing event is sent, before the live one; it is
// never skipped.
func TestLiveOnePastAGapCatchesUp(t *testing.T) {
	ctx := context.Background()
	n := treetest.New(t).Boot(core.DriverFunc(treetest.Answer))
	_, err := n.Inst.CreateSession(ctx, core.NewSession{ID: "s", Principal: "alice"})
	require.NoError(t, err)
	_, err = n.Inst.Admit(ctx, "s", core.PromptInput{Text: "hi"})
	require.NoError(t, err)
	n.Idle()
	evs, err := n.Inst.Events(ctx, "s", 0, 100)
	require.NoError(t, err)
	require.Greater(t, len(evs), 4)

	rec := httptest.NewRecorder()
	s := &stream{w: nethttp.Writer(rec), flush: func() {}, inst: n.Inst, id: "s", last: evs[1].Seq}
	require.NoError(t, s.live(&httpmsg.Request{}, evs[3])) // evs[2] is missing from the live feed
	body := rec.Body.String()
	i2 := strings.Index(body, "id: "+strconv.FormatInt(evs[2].Seq, 10)+"\n")
	i3 := strings.Index(body, "id: "+strconv.FormatInt(evs[3].Seq, 10)+"\n")
	assert.GreaterOrEqual(t, i2, 0, "the missing event was sent")
	assert.Less(t, i2, i3, "in seq order")
}
