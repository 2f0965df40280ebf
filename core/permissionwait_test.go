package core

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/event"
)

// The permission adapter judges a reply itself, as the question adapter
// does: a Go program embedding core calls Reply with no HTTP decoding in
// front. A reply is one decision; a message goes with a reject only, and
// a question's fields (answers, cancel) are refused, whatever else the
// reply says.
func TestPermissionRepliesAreJudged(t *testing.T) {
	refused := map[string]Reply{
		"no decision":                   {},
		"an unknown decision":           {Decision: "maybe"},
		"answers":                       {Answers: [][]string{{"yes"}}, Decision: ReplyOnce},
		"a cancel":                      {Cancel: true},
		"a cancel with a decision":      {Cancel: true, Decision: ReplyOnce},
		"a message with once":           {Decision: ReplyOnce, Message: "fine"},
		"a message with always":         {Decision: ReplyAlways, Message: "fine"},
		"a reject's message over a cap": {Decision: ReplyReject, Message: strings.Repeat("m", MaxReplyMessage+1)},
	}
	for name, r := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := permissionV1{}.Judge(nil, r)
			assert.ErrorIs(t, err, ErrInvalid)
		})
	}

	accepted := map[string]struct {
		reply Reply
		want  Verdict
	}{
		"once":   {Reply{Decision: ReplyOnce}, Verdict{State: BlockerApproved, Event: event.PermissionApproved}},
		"always": {Reply{Decision: ReplyAlways}, Verdict{State: BlockerApproved, Event: event.PermissionApproved, SaveAlways: true}},
		"a plain reject ends the turn": {Reply{Decision: ReplyReject},
			Verdict{State: BlockerRejected, Event: event.PermissionRejected, EndTurn: true}},
		"a reject with a message fails only the call": {Reply{Decision: ReplyReject, Message: "not today"},
			Verdict{State: BlockerRejected, Event: event.PermissionRejected}},
	}
	for name, c := range accepted {
		t.Run(name, func(t *testing.T) {
			v, err := permissionV1{}.Judge(nil, c.reply)
			require.NoError(t, err)
			assert.Equal(t, c.want, v)
		})
	}
}
