// Package webnet is the side of tools/web that needs sockets: package net
// and net/http. It holds the client that sends the web tools' requests
// from this process, the dialer it connects with (DialContext: only what
// the egress policy's DialTargets allows, each address a name resolves to
// checked, names resolved with net.DefaultResolver unless the policy has a
// resolver, the socket's address checked again before connect), and this
// host's interface addresses, which Dialing gives the policy as the
// addresses it refuses as its own. No proxy is used and no redirect
// followed (the http_request tool follows them itself, checking each).
//
// tools/web imports neither net nor net/http, so that a binary that sends
// nothing itself (the wasm guest, the Durable Object, whose platform's
// fetch sends through Egress.WithTransport) links no HTTP client, TLS,
// x509, dialer or resolver. A host that does dial gives its policy to
// Dialing before building the tools:
//
//	policy := webnet.Dialing(conf.EgressPolicy())
//	tools := []tool.Tool{web.NewHTTPRequest(policy)}
package webnet
