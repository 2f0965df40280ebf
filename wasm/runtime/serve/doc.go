// Package serve runs one tree's wasm guest in real time, for servers: real
// timers, real egress (the model provider with the host-held key, tools
// with tools/web and its egress policy), and an http.Handler that turns an
// *http.Request into a guest request and streams the response back (an
// event stream flushes each event).
//
// The guest's response writer never blocks, so what it sends waits in the
// Tree until the client takes it (stream.go). The guest boots with
// BootConfig.Drain: an event stream's catch-up sends a page of the log and
// waits until the client took it before it reads the next (docs/abi.md §3,
// Drain), so a client that stops reading has about a page held for it,
// never the log. What the guest sends without waiting (live events) meets
// the Durable Object's backlog rule: a stream with more than 1 MiB waiting
// and nothing taken for 10 s is ended, what waited dropped, and the
// guest's request cancelled; its client reconnects with Last-Event-ID. A
// slow client that finishes a write (a part, up to 64 KiB) at least every
// 10 s is never ended this way.
//
// The guest's runner decides each tool call before it asks the host to run
// it; what the call reaches as it runs (an http_request redirect to another
// host) the host decides through tool.Call.Permit by the same whole policy:
// the operator's permission rules (Boot.Permissions) and the tool's
// default, with the session's own rules and its saved always rules, which
// live in the guest's database and arrive with the call (permit.go).
//
// A Tree is safe for concurrent use; it serializes guest calls. A guest
// that dies is replaced by a fresh one, booted on the same connection, at
// the next use. Guest calls run with a context of their own: a client that
// goes away cancels its request in the guest, never the guest call.
//
// A Tree never delivers the tree's wake-up: it hands every arm to
// Config.ArmWake, and whoever keeps the wake-up calls Tree.Wake when it is
// due. In the local server that is host/: its durable wake-up index is the
// one owner of delivery for both of its backends, and it starts a new Tree
// for a wake-up of a tree that runs none. Tree.Idle tells its eviction
// whether an execution runs in the guest. host/ reaches this package only
// through the host.GuestRuntime that wasm/backend implements.
package serve
