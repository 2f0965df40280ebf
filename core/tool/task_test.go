package tool_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/revenantrt/revenant/core/tool"
)

// The task tool reads its arguments strictly, so that no other reader of
// the same JSON (SQLite's json_extract, a client) can see another call: a
// key spelt otherwise, a key given twice, an unknown key or a wrong type is
// a tool error naming it.
func TestParseTaskIsStrict(t *testing.T) {
	for args, want := range map[string]tool.TaskArgs{
		`{"prompt":"hi"}`:                             {Prompt: "hi"},
		`{"prompt":"hi","background":true}`:           {Prompt: "hi", Background: true},
		`{"background":false,"prompt":"hi"}`:          {Prompt: "hi"},
		` { "prompt" : "hi" , "background" : true } `: {Prompt: "hi", Background: true},
	} {
		got, err := tool.Task().ParseTask(json.RawMessage(args))
		require.NoError(t, err, args)
		assert.Equal(t, want, got, args)
	}
	for args, msg := range map[string]string{
		`{"prompt":"hi","Background":true}`:                    `unknown argument "Background"`,
		`{"Prompt":"hi"}`:                                      `unknown argument "Prompt"`,
		`{"prompt":"hi","background":false,"background":true}`: `argument "background" is given twice`,
		`{"prompt":"a","prompt":"b"}`:                          `argument "prompt" is given twice`,
		`{"prompt":"hi","description":"x"}`:                    `unknown argument "description"`,
		`{"z":1,"prompt":"hi","a":2,"m":3}`:                    `unknown argument "a"`,
		`{"z":1,"prompt":7,"q":2}`:                             `argument "prompt" has the wrong type`,
		`{"z":1,"background":"yes","":2}`:                      `unknown argument ""`,
		`{"prompt":7,"background":"yes"}`:                      `argument "background" has the wrong type`,
		`{"prompt":"hi","background":"yes"}`:                   `argument "background" has the wrong type`,
		`{"prompt":null}`:                                      `argument "prompt" has the wrong type`,
		`{"prompt":"  "}`:                                      `the prompt is empty`,
		`{}`:                                                   `the prompt is empty`,
		`["hi"]`:                                               `must be a JSON object`,
		`null`:                                                 `must be a JSON object`,
		`{"prompt":`:                                           `must be a JSON object`,
	} {
		_, err := tool.Task().ParseTask(json.RawMessage(args))
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), msg, args)
	}
}
