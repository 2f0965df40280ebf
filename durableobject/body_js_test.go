//go:build js && wasm

package durableobject

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bodyModule is body.mjs evaluated as it is (its exports made a returned
// object) plus a driver: run(sizes, max) makes a source stream of chunks
// of the given sizes (byte i of the body is i % 251), reads it with
// readBody, and answers what came out and what became of the source.
func bodyModule(t *testing.T) func(sizes []int, max int) bodyOutcome {
	t.Helper()
	src, err := os.ReadFile("body.mjs")
	require.NoError(t, err)
	module := regexp.MustCompile(`(?m)^export `).ReplaceAllString(string(src), "")
	run := jsFunc(nil, module+`
		return async function run(sizes, max) {
			const source = { ended: false, cancelled: false, chunks: 0 };
			let at = 0, next = 0;
			const body = new ReadableStream({
				pull(c) {
					if (next === sizes.length) { source.ended = true; return c.close(); }
					const chunk = new Uint8Array(sizes[next++]);
					for (let i = 0; i < chunk.length; i++) chunk[i] = at++ % 251;
					source.chunks++;
					c.enqueue(chunk);
				},
				cancel() { source.cancelled = true; },
			}, { highWaterMark: 0 }); // a client's upload: nothing is read ahead of a read
			const out = new Uint8Array(await readBody({ body, headers: new Headers() }, max));
			const inOrder = out.every((b, i) => b === i % 251);
			// The source's cancel runs inside the reader's cancel, which
			// readBody calls before the last read settles.
			return JSON.stringify({ length: out.length, inOrder, ended: source.ended, cancelled: source.cancelled });
		};`).Invoke()
	return func(sizes []int, max int) bodyOutcome {
		t.Helper()
		jsSizes := make([]any, len(sizes))
		for i, n := range sizes {
			jsSizes[i] = n
		}
		v, err := await(run.Invoke(jsSizes, max))
		require.NoError(t, err)
		var o bodyOutcome
		require.NoError(t, json.Unmarshal([]byte(v.String()), &o))
		return o
	}
}

type bodyOutcome struct {
	Length    int  `json:"length"`
	InOrder   bool `json:"inOrder"`
	Ended     bool `json:"ended"`
	Cancelled bool `json:"cancelled"`
}

// A body read at the cap: up to max bytes pass whole, read to
// the source's end, however the chunks fall; past max exactly max + 1
// bytes come out (the API's handler answers 413 to the one byte over) and
// the rest is cancelled unread. The chunk that ends exactly at the cap is
// the case a workerd test cannot arrange.
func TestBodiesAtTheCap(t *testing.T) {
	run := bodyModule(t)
	const max = 10
	cases := [][]int{
		{}, {0}, {9}, {10}, {4, 6}, {1, 2, 3, 4}, {10, 0}, // at most max
		{11}, {4, 6, 1}, {10, 5}, {3, 20}, {4, 6, 1, 50}, {1000}, // over it
	}
	for _, sizes := range cases {
		total := 0
		for _, n := range sizes {
			total += n
		}
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			o := run(sizes, max)
			assert.True(t, o.InOrder, "the bytes that pass are the body's first bytes, in order")
			if total <= max {
				assert.Equal(t, total, o.Length, "a body within the cap passes whole")
				assert.True(t, o.Ended, "a body within the cap is read to its end")
				assert.False(t, o.Cancelled)
				return
			}
			assert.Equal(t, max+1, o.Length, "one byte over the cap passes, for the 413")
			assert.True(t, o.Cancelled, "the rest is cancelled unread")
			assert.False(t, o.Ended)
		})
	}
}
