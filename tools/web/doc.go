// Package web is outbound HTTP for tools, safe by default: the
// http_request tool, webhook tools, and the Egress policy both go through.
//
// A URL a model supplies is untrusted (DESIGN §12). Every request made by a
// Client built here is checked twice:
//   - before it is sent, and again before each redirect is followed, its
//     scheme, port and host must be on the policy's allow-lists;
//   - when its connection is dialed, the host name is resolved once, every
//     address it resolves to is checked, and only a checked address is
//     dialed, so there is no gap between check and use for DNS to change the
//     answer in; the dialer's Control hook checks the socket's address once
//     more just before connect (Egress.DialTargets, tools/web/webnet).
//
// The permission rules decide the first URL's host before the call runs
// (httpargs.Resources); a redirect to another host is put to them too,
// through the call's tool.Call.Permit, and refused unless they allow it
// outright (redirect.go). A host that runs the tool for a wasip1 guest
// (wasm/runtime/serve) gives a Permit over the same whole policy: its
// operator's rules and the session's and saved rules the guest sends with
// the call. Without a Permit only the egress policy checks redirects.
//
// The package speaks core/httpmsg, not net/http: a client is an
// httpmsg.Doer, which does one round trip, and the http_request tool
// follows redirects itself with net/http's rules (redirect.go), each hop
// checked. It links no HTTP client and no package net (it speaks
// net/netip): a host with sockets gives its policy one with
// tools/web/webnet.Dialing (net/http, dialing only what
// Egress.DialTargets allows, resolving with net.DefaultResolver, and the
// host's interface addresses as its own); a platform with its own fetch
// gives one with Egress.WithTransport; a policy with neither sends nothing
// (ErrNoClient). So the Durable Object, which sends through fetch, links
// neither net/http, TLS nor package net. The wasm guest, which only
// declares http_request, links none of this package: it parses the tool's
// arguments for their resources with tools/web/httpargs, which this
// package parses them with too.
//
// The address rules refuse every block the IANA IPv4 and IPv6
// Special-Purpose Address Registries mark not globally reachable (loopback,
// private, link-local, unspecified, carrier-grade NAT, documentation,
// benchmarking, Teredo, local-use NAT64 and the rest; special.go lists them
// with the registries' exceptions), multicast, every IPv6 address outside
// global unicast 2000::/3, IPv6 forms that embed a refused IPv4 address
// (mapped, compatible, NAT64, 6to4), and this host's own addresses, read
// at each check from the list the policy carries (Egress.WithLocalAddrs;
// webnet.Dialing reads the interfaces): a service bound to 0.0.0.0 answers
// on a public address of the host too. A CIDR of the policy that names an
// address allows it. A host name with anything but ASCII letters, digits,
// '-', '_' and '.' is refused on every transport: a client dials its IDNA
// mapping ("ｌｏｃａｌｈｏｓｔ" as localhost), which the call's permission
// resource, the host as written, does not name.
//
// A webhook's configured URL is the operator's destination, not the
// model's: its client treats that one host and port as trusted (dialed as
// configured, even on a private address) and follows no redirects. The
// trust is per webhook and never reaches http_request, so configuring an
// internal webhook does not open the internal host to the model.
//
// Where this process cannot dial (a Durable Object: no sockets, no DNS),
// the embedder hands the platform's HTTP client in with
// Egress.WithTransport. Then every request, the first and each redirect,
// is checked with CheckURL before that transport sees it; host names are
// resolved by the platform, so their addresses are not checked, and
// loopback names (localhost), numeric hosts a WHATWG parser reads as IPv4
// ("127.1", "0x7f.1") and non-ASCII names are refused instead
// (WithTransport says why that is the guard left).
//
// Environment proxies are not used: a proxy would dial on our behalf and
// escape the address check. Response bodies are capped and requests time
// out (see Egress for the defaults).
//
// Idempotency: http_request declares itself not idempotent, because the
// Tool interface decides that per tool and a model may ask for a POST. A
// crash while a request is in flight is therefore reported to the model as
// an unknown outcome and the request is never sent again. Every request
// still carries `Idempotency-Key: <the call's key>`, so a server that honours
// the header can deduplicate. A webhook tool declares what its
// configuration says; an idempotent one is re-sent after a crash with the
// same key (also its webhook-id) and the same body, stamped and signed
// afresh with the send time. The HTTP client keeps to the same rule: only
// an idempotent webhook's request is marked httpmsg.Request.Replayable, so
// only it may be resent by net/http when a kept-alive connection closes
// before the answer; any other request then fails, and the runner settles
// the call as that error, never sending it again.
//
// Webhook requests are signed as the Standard Webhooks specification says
// (webhook-id, webhook-timestamp, webhook-signature), so a receiver can use
// that specification's libraries or Verify, and refuse a captured delivery
// replayed later.
//
// The package imports core/tool and core/model (the tool contract), core/logs
// (its Secret redacts itself in logs), core/httpmsg and
// tools/web/httpargs, nothing else of revenant, and not net/http; a test enforces
// it. It is not part of core, so it may use the real network and clock.
package web
