package offline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/model"
)

// inputTokens counts what strings.Fields splits, Unicode spaces and
// invalid UTF-8 included.
func TestInputTokensIsFields(t *testing.T) {
	texts := []string{
		"", " ", "a", " a ", "a b", "a  b\tc\nd\ve\fg\rh", "\u00a0x\u0085y\u2003z\u3000",
		"\xff \xfe\xfd", "a\x80b c", "é è\u2028ü", strings.Repeat("word ", 50),
	}
	var msgs []model.Message
	want := 0
	for _, s := range texts {
		one := []model.Message{{Text: s}}
		assert.Equal(t, len(strings.Fields(s)), inputTokens(one), "inputTokens(%q)", s)
		msgs = append(msgs, model.Message{Text: s})
		want += len(strings.Fields(s))
	}
	assert.Equal(t, want, inputTokens(msgs), "all of them")
}
