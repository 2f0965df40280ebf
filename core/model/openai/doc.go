// Package openai is the provider for OpenAI-compatible chat completions: a
// model.Model that streams answers from POST {BaseURL}/chat/completions. It
// works with OpenAI, OpenRouter, Ollama, vLLM and Workers AI's
// OpenAI-compatible endpoint, and with anything else that speaks the same
// protocol.
//
// Requests always stream ("stream": true) and ask for usage
// ("stream_options": {"include_usage": true}). The answer is read as
// server-sent events: each "data:" event is one completion chunk, "data:
// [DONE]" ends it, comments and other fields are ignored. A server that
// ignores "stream" and answers with one JSON completion is accepted too.
//
// Rules:
//
//   - Provider tool-call ids are passed on (ToolCallDelta.ID) but never
//     trusted: some providers omit them, some reuse them across answers or
//     within one. Calls are told apart by index. A delta without an index
//     is placed by order of appearance: it starts a new call, at the next
//     index after every index seen so far, when it carries an id different
//     from the latest call's or, without an id, a function name while the
//     latest call already has one; otherwise it continues the latest call
//     (call 0 when there is none yet).
//   - Retrying is the caller's: the model never retries. HTTP 408, 429 and
//     5xx, transport failures, cut streams and in-stream errors carrying
//     such a code are *model.Error with Retryable set; RetryAfter comes from
//     retry-after-ms or a delta-seconds Retry-After, capped at
//     Config.MaxRetryAfter. An HTTP-date Retry-After is treated as no hint,
//     because reading it would need the current time, which this package
//     never reads. Other 4xx answers are permanent.
//   - A body that ends without [DONE] is a cut stream (retryable), unless a
//     finish reason already came: the answer is then complete, and only the
//     usage report may be missing. A 200 answer that declares a type other
//     than text/event-stream (or JSON) and ends with no event in it is not
//     a cut but a wrong endpoint (an HTML page, a proxy's notice): it is
//     permanent, and its error names the Content-Type. An answer that
//     holds no choice at all (no text, no tool call, no finish reason:
//     {"choices":[]}, or [DONE] alone) is permanent too, never an empty
//     reply; a choiceless event beside the answer's own (usage, a
//     filter's notice) is read as ever.
//   - The API key never leaves the Authorization header: every error
//     message is scrubbed of it, and Config and Model print and log (fmt,
//     slog) with the key redacted.
//   - No clocks and no sleeps: the only waits are on the network, and they
//     end when the context given to Stream or Recv ends, or on Close.
//
// It imports only the standard library, core/httpmsg and core/model, and
// never net/http (whose client and TLS would weigh on the wasm guest and the
// Durable Object). The HTTP client is injected (Config.Client, an
// httpmsg.Doer, required): hosts without sockets (js/wasm, wasip1) route
// requests through their own egress, hosts with net/http pass
// nethttp.Client(...). A Doer does one round trip: redirects are not
// followed, and a 3xx answer is a permanent error.
package openai
