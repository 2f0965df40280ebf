//go:build js && wasm

package durableobject

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bodyModule is body.mjs evaluated as it is (its exports made a returned
// object) plus a driver: run(which, sizes, max, declared) makes a source
// stream of chunks of the given sizes (byte i of the body is i % 251),
// passes it through readBody or capped, reads everything that comes out,
// and answers what came out and what became of the source.
func bodyModule(t *testing.T) func(which string, sizes []int, max int, declared bool) bodyOutcome {
	t.Helper()
	src, err := os.ReadFile("body.mjs")
	require.NoError(t, err)
	module := regexp.MustCompile(`(?m)^export `).ReplaceAllString(string(src), "")
	run := jsFunc(nil, module+`
		return async function run(which, sizes, max, declared) {
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
			const headers = new Headers(declared ? { "content-length": "1" } : {});
			const request = { body, headers };
			let out;
			if (which === "readBody") {
				out = new Uint8Array(await readBody(request, max));
			} else {
				const passed = capped(request, max);
				if (passed === body) return JSON.stringify({ same: true });
				const parts = [];
				const reader = passed.getReader();
				for (;;) {
					const { done, value } = await reader.read();
					if (done) break;
					parts.push(...value);
				}
				out = Uint8Array.from(parts);
			}
			const inOrder = out.every((b, i) => b === i % 251);
			// The source's cancel runs inside the reader's cancel, which both
			// functions call before the last read settles.
			return JSON.stringify({ length: out.length, inOrder, ended: source.ended, cancelled: source.cancelled });
		};`).Invoke()
	return func(which string, sizes []int, max int, declared bool) bodyOutcome {
		t.Helper()
		jsSizes := make([]any, len(sizes))
		for i, n := range sizes {
			jsSizes[i] = n
		}
		v, err := await(run.Invoke(which, jsSizes, max, declared))
		require.NoError(t, err)
		var o bodyOutcome
		require.NoError(t, json.Unmarshal([]byte(v.String()), &o))
		return o
	}
}

type bodyOutcome struct {
	Same      bool `json:"same"`
	Length    int  `json:"length"`
	InOrder   bool `json:"inOrder"`
	Ended     bool `json:"ended"`
	Cancelled bool `json:"cancelled"`
}

// Both readers of a body at the cap: up to max bytes pass whole, read to
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
	for _, which := range []string{"readBody", "capped"} {
		for _, sizes := range cases {
			total := 0
			for _, n := range sizes {
				total += n
			}
			t.Run(fmt.Sprintf("%s/%v", which, sizes), func(t *testing.T) {
				o := run(which, sizes, max, false)
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
}

// A declared Content-Length is the platform's to hold to (the front
// refused one over the cap): capped passes the body as it is.
func TestCappedLeavesADeclaredLengthAlone(t *testing.T) {
	o := bodyModule(t)("capped", []int{50}, 10, true)
	assert.True(t, o.Same)
}

// When the object stops reading a body capped passes on (its handler
// answered before the end), the client's body behind it is cancelled too,
// not left unread: whether the object stopped within the cap or after
// the one byte over it.
func TestCappedCancelsTheSourceWhenTheReaderStops(t *testing.T) {
	src, err := os.ReadFile("body.mjs")
	require.NoError(t, err)
	module := regexp.MustCompile(`(?m)^export `).ReplaceAllString(string(src), "")
	run := jsFunc(nil, module+`
		return async function run(sizes, max, reads) {
			const source = { cancelled: false };
			let next = 0;
			const body = new ReadableStream({
				pull(c) {
					if (next === sizes.length) return c.close();
					c.enqueue(new Uint8Array(sizes[next++]));
				},
				cancel() { source.cancelled = true; },
			}, { highWaterMark: 0 });
			const reader = capped({ body, headers: new Headers() }, max).getReader();
			for (let i = 0; i < reads; i++) await reader.read();
			await reader.cancel("the object answered");
			return source.cancelled;
		};`).Invoke()
	for _, c := range []struct {
		name  string
		sizes []int
		reads int
	}{
		{"within the cap", []int{4, 4, 4}, 1},
		{"before any read", []int{4, 4, 4}, 0},
		{"after the byte over", []int{4, 20}, 2},
	} {
		v, err := await(run.Invoke(js.ValueOf(toAnys(c.sizes)), 10, c.reads))
		require.NoError(t, err, c.name)
		assert.True(t, v.Bool(), "%s: the client's body is cancelled", c.name)
	}
}

func toAnys(ns []int) []any {
	out := make([]any, len(ns))
	for i, n := range ns {
		out[i] = n
	}
	return out
}
