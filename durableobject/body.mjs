// Request bodies at the API's cap (max_body, 1 MiB by default), for the
// Tree object and the front Worker (readBody, drop). A body is
// never read past one byte over the cap: the API's handlers read the same
// way (one byte over is their 413), and a body held whole in the isolate,
// and again in Go's memory, which never shrinks, is what the cap exists to
// prevent.
//
// This module imports nothing, so the js/wasm tests (body_js_test.go)
// evaluate it as it is and drive it with streams of chosen chunks: where
// a chunk ends against the cap is not something a test can choose through
// workerd.

// readBody reads a request's body into an ArrayBuffer of at most max + 1
// bytes and cancels the rest unread.
export async function readBody(request, max) {
  if (!request.body) return new ArrayBuffer(0);
  const reader = request.body.getReader();
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const part = value.byteLength > max + 1 - n ? value.subarray(0, max + 1 - n) : value;
    chunks.push(part);
    n += part.byteLength;
    if (n > max) {
      drop(reader); // not awaited: the answer need not wait for the client's side
      break;
    }
  }
  if (chunks.length === 1 && chunks[0].byteLength === chunks[0].buffer.byteLength) return chunks[0].buffer;
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out.buffer;
}

// drop gives up the rest of a body past the cap, unread. Under wrangler
// dev a client still sending it may see the answer cut short or turned
// into wrangler's 503: workerd, the client's server there, closes the
// connection with the upload unread, which resets it. A deployed Worker
// sits behind Cloudflare's edge.
export function drop(reader) {
  reader.cancel("revenant: the request body is over the limit").catch(() => {});
}
