package api_test

import (
	"testing"

	"github.com/revenantrt/revenant/core/api"
)

// The decoders never panic and every rejection is a client error. CI runs
// each target for a fixed short time (make fuzz).
func fuzzDecoder(f *testing.F, seeds []string, decode func([]byte) error) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := decode(body)
		if err == nil {
			return
		}
		status := api.StatusOf(err)
		if status < 400 || status >= 500 {
			t.Fatalf("decoder error %v maps to %d, want 4xx", err, status)
		}
	})
}

func FuzzDecodePrompt(f *testing.F) {
	fuzzDecoder(f, []string{`{"text":"hi"}`, `{"text":"a","id":"x","mode":"replace"}`, `{"text":5}`, `[]`, ``, `{"text":"a"}{}`},
		func(b []byte) error { _, err := api.DecodePrompt(b); return err })
}

func FuzzDecodeCreate(f *testing.F) {
	fuzzDecoder(f, []string{``, `{}`, `{"config":{"system_prompt":"be brief","tools":["echo"]}}`, `{"config":7}`, `{"config":{"x":1}}`},
		func(b []byte) error { _, err := api.DecodeCreate(b); return err })
}

func FuzzDecodeReply(f *testing.F) {
	fuzzDecoder(f, []string{`{"reply":"once","response_id":"r"}`, `{"answers":[["a"]],"response_id":"r"}`, `{"cancel":true,"response_id":"r"}`},
		func(b []byte) error {
			if _, err := api.DecodeReply(b, "permission"); err != nil {
				return err
			}
			_, err := api.DecodeReply(b, "question")
			return err
		})
}
