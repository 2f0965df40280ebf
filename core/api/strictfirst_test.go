package api_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/internal/treetest"
)

// A body with several unknown members is refused naming the first, as the
// client wrote them, whatever follows it: the walk goes on past it only to
// find a member named twice (checkMembers).
func TestStrictJSONNamesTheFirstUnknownMember(t *testing.T) {
	f := newFixture(t, treetest.NewDriver(8), nil)
	c := f.client(t, "")
	p := "/v1/sessions/" + c.create() + "/prompt"
	for body, want := range map[string]string{
		`{"txt":"a","Text":"b"}`:                       `unknown field "txt"`,
		`{"text":"a","mdoe":"queue","idd":"x"}`:        `unknown field "mdoe"`,
		`{"TEXT":"a","prompt":{"x":1}}`:                `unknown field "TEXT" (field names are case-sensitive: "text")`,
		`{"text":"a","extra":{"deep":1},"later":true}`: `unknown field "extra"`,
	} {
		var e api.ErrorBody
		c.do("POST", p, body, &e)
		assert.Equal(t, api.ErrInvalidRequest, e.Error.Type, body)
		assert.Equal(t, want, e.Error.Message, body)
	}
}
