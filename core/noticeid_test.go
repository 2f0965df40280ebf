package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core"
)

// A background child's notice carries the id docs/api.md (Sub-agents)
// promises, notice-{child}-{turn}: clients read it as the notice's
// client_id. The other tests name it through NoticeClientID itself, so
// only a literal catches the format drifting from the documented one.
func TestNoticeClientIDIsTheDocumentedOne(t *testing.T) {
	assert.Equal(t, "notice-root.1-1", core.NoticeClientID("root.1", 1))
	assert.Equal(t, "notice-root.1.2-3", core.NoticeClientID("root.1.2", 3), "a grandchild's, at its third turn")
}
